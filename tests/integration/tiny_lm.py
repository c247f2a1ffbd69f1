"""A tiny, randomly initialized causal LM and its tokenizer, built locally (no downloads): a
byte-level BPE trained on the problems' own text, with a chat template, and a 2-layer Llama."""
import glob
import os

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")
SPECIAL = ["<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]


def corpus(src):
    texts = []
    for pattern in ("problems/*/*/prompt.md", "problems/*/*/solutions/*.cu",
                    "summarizer_hooks/templates/*.txt"):
        for path in sorted(glob.glob(os.path.join(src, pattern))):
            with open(path, errors="replace") as f:
                texts.append(f.read())
    return texts


def build(src, out_dir, vocab_size=600, seed=0):
    """Saves the tokenizer and model to out_dir (from_pretrained(out_dir) loads both)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(corpus(src), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|pad|>", bos_token="<|bos|>",
                                  eos_token="<|end|>")
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=16384, pad_token_id=tok.pad_token_id,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = LlamaForCausalLM(config)
    tok.save_pretrained(out_dir)
    model.save_pretrained(out_dir)
    return out_dir
