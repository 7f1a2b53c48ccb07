package monitor

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// setter copies row i of one column into one field of a row struct.
type setter func(dst reflect.Value, i int)

// decodeRows returns the rows of rec for which keep (nil: every row) is
// true, as values of T: each field of T is filled from the column named by
// its parquet tag. A column missing or of another type is an error naming
// it; no row is decoded then.
func decodeRows[T any](rec arrow.RecordBatch, keep func(i int) bool) ([]T, error) {
	rt := reflect.TypeFor[T]()
	plan := make([]setter, rt.NumField())
	for k := 0; k < rt.NumField(); k++ {
		f := rt.Field(k)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: no column %s", ErrData, name)
		}
		s, err := fieldSetter(k, f.Type, rec.Column(idx[0]))
		if err != nil {
			return nil, fmt.Errorf("%w: column %s: %v", ErrData, name, err)
		}
		plan[k] = s
	}
	out := make([]T, 0, rec.NumRows())
	for i := 0; i < int(rec.NumRows()); i++ {
		if keep != nil && !keep(i) {
			continue
		}
		var row T
		v := reflect.ValueOf(&row).Elem()
		for _, s := range plan {
			s(v, i)
		}
		out = append(out, row)
	}
	return out, nil
}

func fieldSetter(k int, t reflect.Type, col arrow.Array) (setter, error) {
	bad := func() (setter, error) { return nil, fmt.Errorf("type %s does not fill a Go %s", col.DataType(), t) }
	switch t.Kind() {
	case reflect.String:
		c, ok := col.(*array.String)
		if !ok {
			return bad()
		}
		return func(dst reflect.Value, i int) { dst.Field(k).SetString(c.Value(i)) }, nil
	case reflect.Bool:
		c, ok := col.(*array.Boolean)
		if !ok {
			return bad()
		}
		return func(dst reflect.Value, i int) { dst.Field(k).SetBool(c.Value(i)) }, nil
	case reflect.Int32, reflect.Int64:
		switch c := col.(type) {
		case *array.Int32:
			return func(dst reflect.Value, i int) { dst.Field(k).SetInt(int64(c.Value(i))) }, nil
		case *array.Int64:
			return func(dst reflect.Value, i int) { dst.Field(k).SetInt(c.Value(i)) }, nil
		}
		return bad()
	case reflect.Float32, reflect.Float64:
		switch c := col.(type) {
		case *array.Float32:
			return func(dst reflect.Value, i int) { dst.Field(k).SetFloat(float64(c.Value(i))) }, nil
		case *array.Float64:
			return func(dst reflect.Value, i int) { dst.Field(k).SetFloat(c.Value(i)) }, nil
		}
		return bad()
	case reflect.Slice:
		l, ok := col.(*array.List)
		if !ok {
			return bad()
		}
		switch v := l.ListValues().(type) {
		case *array.String:
			if t.Elem().Kind() != reflect.String {
				return bad()
			}
			return func(dst reflect.Value, i int) {
				lo, hi := l.ValueOffsets(i)
				s := make([]string, 0, hi-lo)
				for j := lo; j < hi; j++ {
					s = append(s, v.Value(int(j)))
				}
				dst.Field(k).Set(reflect.ValueOf(s).Convert(t))
			}, nil
		case *array.Int8:
			return listSetter(k, t, l, v.Values())
		case *array.Int16:
			return listSetter(k, t, l, v.Values())
		case *array.Int32:
			return listSetter(k, t, l, v.Values())
		case *array.Int64:
			return listSetter(k, t, l, v.Values())
		case *array.Float32:
			return listSetter(k, t, l, v.Values())
		}
		return bad()
	}
	return bad()
}

// listSetter copies a numeric list column into a field of type []E.
func listSetter[E any](k int, t reflect.Type, l *array.List, vals []E) (setter, error) {
	if reflect.TypeFor[[]E]() != t {
		return nil, fmt.Errorf("type %s does not fill a Go %s", l.DataType(), t)
	}
	return func(dst reflect.Value, i int) {
		lo, hi := l.ValueOffsets(i)
		if lo < 0 || hi < lo || int(hi) > len(vals) {
			return // an inconsistent list reads as empty
		}
		dst.Field(k).Set(reflect.ValueOf(append(make([]E, 0, hi-lo), vals[lo:hi]...)))
	}, nil
}

// segSummary is what the panels keep of a segment row: counts, not tokens.
type segSummary struct {
	RunID            string
	RolloutID        string
	Iteration        int32
	SegmentIndex     int32
	FirstCall        int32
	LastCall         int32
	PromptTokens     int
	CompletionTokens int
	Sampled          int     // loss mask 1
	LogprobSum       float64 // over sampled tokens
	Responses        []int32 // lengths of the runs of sampled tokens: one per LLM call's response
	PolicyVersion    int64
	FinishReason     string
}

// decodeSegSummaries reads the segments of a batch as summaries, without
// copying token lists.
func decodeSegSummaries(rec arrow.RecordBatch) ([]segSummary, error) {
	type meta struct {
		RunID        string `parquet:"run_id"`
		Iteration    int32  `parquet:"iteration"`
		RolloutID    string `parquet:"rollout_id"`
		SegmentIndex int32  `parquet:"segment_index"`
		FirstCall    int32  `parquet:"first_call"`
		LastCall     int32  `parquet:"last_call"`
		Policy       int64  `parquet:"policy_version"`
		FinishReason string `parquet:"finish_reason"`
	}
	metas, err := decodeRows[meta](rec, nil)
	if err != nil {
		return nil, err
	}
	prompt, err := listCol[int32, *array.Int32](rec, "prompt_token_ids")
	if err != nil {
		return nil, err
	}
	completion, err := listCol[int32, *array.Int32](rec, "completion_token_ids")
	if err != nil {
		return nil, err
	}
	mask, err := listCol[int8, *array.Int8](rec, "loss_mask")
	if err != nil {
		return nil, err
	}
	lps, err := listCol[float32, *array.Float32](rec, "logprobs")
	if err != nil {
		return nil, err
	}
	out := make([]segSummary, len(metas))
	for i, m := range metas {
		s := segSummary{RunID: m.RunID, RolloutID: m.RolloutID, Iteration: m.Iteration, SegmentIndex: m.SegmentIndex,
			FirstCall: m.FirstCall, LastCall: m.LastCall, PolicyVersion: m.Policy, FinishReason: m.FinishReason,
			PromptTokens: len(prompt.at(i)), CompletionTokens: len(completion.at(i))}
		mk, lp := mask.at(i), lps.at(i)
		run := int32(0)
		for t, v := range mk {
			if v == 1 {
				s.Sampled++
				run++
				if t < len(lp) {
					s.LogprobSum += float64(lp[t])
				}
				continue
			}
			if run > 0 {
				s.Responses = append(s.Responses, run)
				run = 0
			}
		}
		if run > 0 {
			s.Responses = append(s.Responses, run)
		}
		out[i] = s
	}
	return out, nil
}

// numList is a list column over a numeric array, read without copies.
type numList[E any] struct {
	l    *array.List
	vals []E
}

func listCol[E any, A interface {
	arrow.Array
	Values() []E
}](rec arrow.RecordBatch, name string) (numList[E], error) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return numList[E]{}, fmt.Errorf("%w: no column %s", ErrData, name)
	}
	l, ok := rec.Column(idx[0]).(*array.List)
	if !ok {
		return numList[E]{}, fmt.Errorf("%w: column %s has type %s", ErrData, name, rec.Column(idx[0]).DataType())
	}
	v, ok := l.ListValues().(A)
	if !ok {
		return numList[E]{}, fmt.Errorf("%w: column %s has elements of type %s", ErrData, name, l.ListValues().DataType())
	}
	return numList[E]{l: l, vals: v.Values()}, nil
}

// at returns row i's list; it aliases the batch's memory. An inconsistent
// list reads as empty.
func (c numList[E]) at(i int) []E {
	lo, hi := c.l.ValueOffsets(i)
	if lo < 0 || hi < lo || int(hi) > len(c.vals) {
		return nil
	}
	return c.vals[lo:hi]
}
