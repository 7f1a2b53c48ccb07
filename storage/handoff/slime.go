package handoff

import (
	"archive/zip"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/legorl/legorl/schemas"
)

// slimeStatus is slime's Sample.Status for a legorl rollout: "aborted"
// when it is masked (it also sets remove_sample, which zeroes its loss
// mask in slime), "truncated" when its agent ran out of turns, "completed"
// otherwise. slime feeds "truncated" to its loss as a flag.
func slimeStatus(s Sample) string {
	switch {
	case s.masked():
		return "aborted"
	case s.Rollout.Termination == schemas.TerminationMaxTurns:
		return "truncated"
	}
	return "completed"
}

// slimeSample is one sample as slime's Sample.to_dict() writes it
// (slime/utils/types.py); Sample.from_dict reads it back.
func slimeSample(s Sample) (map[string]any, error) {
	toks := s.tokens()
	// slime keeps one routing row per token but the last (the engine
	// never runs the last sampled token; slime asserts len(tokens)-1 rows).
	routes, err := s.routes(len(toks) - 1)
	if err != nil {
		return nil, err
	}
	var experts any
	if routes != nil {
		experts = routes
	}
	m := s.meta()
	return map[string]any{
		"group_index":            int64(s.Group),
		"index":                  int64(s.Index),
		"rollout_id":             int64(s.RolloutIndex),
		"prompt":                 "",
		"tokens":                 anys(toks),
		"response":               "",
		"response_length":        int64(len(s.Segment.CompletionTokenIDs)),
		"label":                  nil,
		"reward":                 s.Rollout.Reward,
		"loss_mask":              anys(s.Segment.LossMask),
		"weight_versions":        []any{strconv.FormatInt(s.Segment.PolicyVersion, 10)},
		"rollout_log_probs":      anys(s.Segment.Logprobs),
		"rollout_routed_experts": experts,
		"remove_sample":          s.masked(),
		"status":                 slimeStatus(s),
		"metadata":               m,
	}, nil
}

// WriteSlime writes one iteration's samples as the file slime's
// load_debug_rollout_data reads (slime/observability/rollout_data_utils.py):
// torch.save({"rollout_id": rolloutID, "samples": [...]}), a zip archive of
// uncompressed records archive/data.pkl (the pickle), archive/byteorder
// and archive/version, as torch.save lays them out. The data holds no
// tensors: slime turns the lists into tensors itself.
func WriteSlime(w io.Writer, rolloutID int, samples []Sample) error {
	list := make([]any, len(samples))
	for i, s := range samples {
		d, err := slimeSample(s)
		if err != nil {
			return fmt.Errorf("handoff: slime: sample %d: %w", i, err)
		}
		list[i] = d
	}
	pkl, err := pickle(map[string]any{"rollout_id": int64(rolloutID), "samples": list})
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for _, rec := range []struct {
		name string
		data []byte
	}{
		{"archive/data.pkl", pkl},
		{"archive/byteorder", []byte("little")},
		{"archive/version", []byte("3\n")},
	} {
		// CreateRaw with the sizes known: no data descriptors, as
		// torch's own writer.
		f, err := zw.CreateRaw(&zip.FileHeader{Name: rec.name, Method: zip.Store,
			CRC32: crc32.ChecksumIEEE(rec.data), CompressedSize64: uint64(len(rec.data)), UncompressedSize64: uint64(len(rec.data))})
		if err != nil {
			return fmt.Errorf("handoff: slime: %w", err)
		}
		if _, err := f.Write(rec.data); err != nil {
			return fmt.Errorf("handoff: slime: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("handoff: slime: %w", err)
	}
	return nil
}
