P=$PKGYM; S=problems/collectives
for v in "" "PKGYM_REF_IN_WINDOW=1"; do
  for id in scatter alltoall; do
    echo "=== $id ${v:-default}"; env $v PKGYM_NCCL_DEBUG=WARN timeout 60 $P check --problem collectives/$id $S/$id/solutions/correct.cu --trials 1 --timeout-ms 15000 --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['status'], d['reason'][:300], d['speedup'], d['stages']); print((d.get('stderr_tail') or '')[-1500:])"
  done
done
echo "=== scatter --reference (reference as candidate)"; timeout 60 $P check --problem collectives/scatter --reference --trials 1 --timeout-ms 15000 --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['status'], d['reason'][:300]); print((d.get('stderr_tail') or '')[-800:])"
