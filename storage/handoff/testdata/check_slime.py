"""Reads a legorl export for slime as slime does and checks what slime checks.

Usage: check_slime.py FILE.pt

It loads the file with torch.load(weights_only=False), as slime's
load_debug_rollout_data does (slime/observability/rollout_data_utils.py),
or, where PyTorch is not installed, with zipfile and pickle (the records
torch.save writes), and says which on its first line. For every sample it
checks the invariants slime asserts when it turns samples into train data
(slime/ray/rollout.py _convert_samples_to_train_data and
slime/backends/megatron_utils/cp_utils.py): one loss-mask value per
response token, one rollout logprob per response token, len(tokens) - 1
routing rows of equal layers x top-k, and a Sample.Status value. It prints
one JSON summary per sample for the Go test to compare with the store.
"""

import json
import pickle
import sys
import zipfile

STATUSES = {"pending", "completed", "truncated", "aborted", "failed"}


def load(path):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        return "torch", torch.load(path, weights_only=False)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/")[0]
        assert all(n.startswith(prefix + "/") for n in names), names
        assert z.read(prefix + "/version").strip() == b"3", "version"
        assert z.read(prefix + "/byteorder") == b"little", "byteorder"
        return "pickle", pickle.loads(z.read(prefix + "/data.pkl"))


def main():
    how, data = load(sys.argv[1])
    print(how)
    assert set(data) == {"rollout_id", "samples"}, sorted(data)
    for s in data["samples"]:
        assert s["status"] in STATUSES, s["status"]
        n = s["response_length"]
        assert len(s["loss_mask"]) == n, ("loss_mask", len(s["loss_mask"]), n)
        assert len(s["rollout_log_probs"]) == n, ("rollout_log_probs", len(s["rollout_log_probs"]), n)
        assert n <= len(s["tokens"])
        assert all(m in (0, 1) for m in s["loss_mask"])
        assert all(lp <= 0 for lp in s["rollout_log_probs"])
        experts = s["rollout_routed_experts"]
        shape = None
        if experts is not None:
            assert len(experts) == len(s["tokens"]) - 1, ("routing rows", len(experts), len(s["tokens"]))
            layers, k = len(experts[0]), len(experts[0][0])
            assert all(len(row) == layers and all(len(e) == k for e in row) for row in experts)
            shape = [len(experts), layers, k]
        print(json.dumps({
            "rollout_id": data["rollout_id"],
            "index": s["index"], "group_index": s["group_index"], "sample_rollout_id": s["rollout_id"],
            "tokens": len(s["tokens"]), "first_token": s["tokens"][0], "last_token": s["tokens"][-1],
            "response_length": n, "mask_sum": sum(s["loss_mask"]),
            "logprob_sum": sum(s["rollout_log_probs"]), "reward": s["reward"],
            "remove_sample": s["remove_sample"], "status": s["status"],
            "routing_shape": shape, "first_expert": experts[0][0][0] if experts else None,
            "legorl_rollout_id": s["metadata"]["legorl_rollout_id"],
        }, sort_keys=True))


main()
