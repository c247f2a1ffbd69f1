"""pkb/58_openclip_contrastive_loss = ParallelKernelBench problem 58:
solution(image_features (B, D), text_features (B, D), logit_scale, logit_bias) -> this rank's
scalar SigLIP loss, its images against every rank's texts (the texts passed around a ring).
B = batch / world. With fp64=True the inputs are float64 copies and PKB's solution() runs every
op, and its isend/irecv, in float64: the fp64 evaluation."""
PKB_REFERENCE = "58_openclip_contrastive_loss.py"


def run(pkb, inputs, dims, world, rank, fp64=False, params=None):
    b, d = dims["batch"] // world, dims["D"]
    p = params or {}
    scale = float(p.get("logit_scale", 10.0))
    bias = float(p.get("logit_bias", -10.0))
    img = inputs["image_features"].view(b, d)
    txt = inputs["text_features"].view(b, d)
    return {"loss": pkb.solution(img, txt, scale, bias).reshape(-1)}
