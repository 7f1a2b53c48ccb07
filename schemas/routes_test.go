package schemas_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/legorl/legorl/schemas"
)

func TestRoutesRoundTrip(t *testing.T) {
	// 3 tokens x 2 layers x top-2, every id distinct so a wrong index shows.
	in := [][][]int16{
		{{0, 1}, {2, 3}},
		{{4, 5}, {6, 7}},
		{{8, 9}, {10, 11}},
	}
	s := schemas.Segment{PromptTokenIDs: []int32{1}, CompletionTokenIDs: []int32{2, 3}}
	if err := s.SetRoutes(in); err != nil {
		t.Fatal(err)
	}
	if s.RoutingLayers != 2 || s.RoutingTopK != 2 || len(s.RoutingExperts) != 12 {
		t.Fatalf("compact form: layers=%d k=%d n=%d", s.RoutingLayers, s.RoutingTopK, len(s.RoutingExperts))
	}
	r, err := s.Routes()
	if err != nil {
		t.Fatal(err)
	}
	for tok := range in {
		for l := range in[tok] {
			if got := r.At(tok, l); !slices.Equal(got, in[tok][l]) {
				t.Errorf("At(%d,%d) = %v, want %v", tok, l, got, in[tok][l])
			}
		}
	}
	// The view must not let a caller append into the next token's ids.
	if v := r.At(0, 0); cap(v) != 2 {
		t.Errorf("At returned a slice with cap %d, want 2", cap(v))
	}
}

func TestSetRoutesRagged(t *testing.T) {
	var s schemas.Segment
	err := s.SetRoutes([][][]int16{{{1, 2}}, {{1}}})
	if !errors.Is(err, schemas.ErrRoutingShape) {
		t.Fatalf("ragged k: got %v", err)
	}
	err = s.SetRoutes([][][]int16{{{1}}, {{1}, {2}}})
	if !errors.Is(err, schemas.ErrRoutingShape) {
		t.Fatalf("ragged layers: got %v", err)
	}
}

func TestRoutesMustCoverPromptAndCompletion(t *testing.T) {
	s := schemas.Segment{PromptTokenIDs: []int32{1, 2}, CompletionTokenIDs: []int32{3}}
	// One token routed, but the segment has three (prompt and completion).
	if err := s.SetRoutes([][][]int16{{{1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Routes(); !errors.Is(err, schemas.ErrRoutingShape) {
		t.Fatalf("got %v, want ErrRoutingShape", err)
	}
}
