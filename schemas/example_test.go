package schemas_test

import (
	"fmt"

	"github.com/legorl/legorl/schemas"
)

// A segment stores MoE routing as a flat list plus its shape; Routes gives
// the [tokens][layers][k] view back.
func ExampleSegment_Routes() {
	s := schemas.Segment{PromptTokenIDs: []int32{11}, CompletionTokenIDs: []int32{12}}
	_ = s.SetRoutes([][][]int16{
		{{3, 7}, {1, 2}}, // token 11: layer 0 chose experts 3 and 7, layer 1 chose 1 and 2
		{{5, 0}, {4, 6}}, // token 12
	})
	r, _ := s.Routes()
	fmt.Println(s.RoutingExperts, r.Tokens, r.Layers, r.K, r.At(1, 1))
	// Output: [3 7 1 2 5 0 4 6] 2 2 2 [4 6]
}
