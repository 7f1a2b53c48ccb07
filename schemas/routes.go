package schemas

import "fmt"

// Routes is the 3-D view [tokens][layers][k] of a segment's flat routing list:
// the expert ids the MoE router chose for each token in each MoE layer.
type Routes struct {
	Experts []int16 // flat, token-major: token t, layer l, slot j is at (t*Layers+l)*K+j
	Tokens  int
	Layers  int
	K       int
}

// At returns the K expert ids of token t in MoE layer l. It shares memory
// with r.Experts.
func (r Routes) At(t, l int) []int16 {
	i := (t*r.Layers + l) * r.K
	return r.Experts[i : i+r.K : i+r.K]
}

// Empty reports whether the segment carries no routing (a dense model).
func (r Routes) Empty() bool { return len(r.Experts) == 0 }

// Routes returns the segment's routing as a 3-D view over every token of the
// segment (prompt then completion). A dense model's segment has no routing
// and returns an empty view. It fails with ErrRoutingShape when the flat list
// does not hold exactly tokens x layers x k ids, or when an id is negative.
func (s *Segment) Routes() (Routes, error) {
	tokens := len(s.PromptTokenIDs) + len(s.CompletionTokenIDs)
	r := Routes{Experts: s.RoutingExperts, Tokens: tokens, Layers: int(s.RoutingLayers), K: int(s.RoutingTopK)}
	if len(s.RoutingExperts) == 0 && s.RoutingLayers == 0 && s.RoutingTopK == 0 {
		return r, nil
	}
	if r.Layers <= 0 || r.K <= 0 || len(r.Experts) != tokens*r.Layers*r.K {
		return Routes{}, fmt.Errorf("%w: %d expert ids for %d tokens x %d layers x %d experts",
			ErrRoutingShape, len(r.Experts), tokens, r.Layers, r.K)
	}
	for i, e := range r.Experts {
		if e < 0 {
			return Routes{}, fmt.Errorf("%w: expert id %d at %d is negative", ErrRoutingShape, e, i)
		}
	}
	return r, nil
}

// SetRoutes stores a [tokens][layers][k] routing table in the segment's
// compact form. Every token must have the same number of layers and every
// layer the same k.
func (s *Segment) SetRoutes(routes [][][]int16) error {
	if len(routes) == 0 {
		s.RoutingExperts, s.RoutingLayers, s.RoutingTopK = nil, 0, 0
		return nil
	}
	layers, k := len(routes[0]), 0
	if layers > 0 {
		k = len(routes[0][0])
	}
	flat := make([]int16, 0, len(routes)*layers*k)
	for t, tok := range routes {
		if len(tok) != layers {
			return fmt.Errorf("%w: token %d has %d layers, token 0 has %d", ErrRoutingShape, t, len(tok), layers)
		}
		for l, ids := range tok {
			if len(ids) != k {
				return fmt.Errorf("%w: token %d layer %d has %d experts, want %d", ErrRoutingShape, t, l, len(ids), k)
			}
			flat = append(flat, ids...)
		}
	}
	s.RoutingExperts, s.RoutingLayers, s.RoutingTopK = flat, int32(layers), int32(k)
	return nil
}
