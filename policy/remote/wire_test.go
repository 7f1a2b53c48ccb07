package remote

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/remote/remotetest"
)

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a": 1}`},
		{`[NaN, -Infinity, Infinity]`, `["NaN", "-Infinity", "Infinity"]`},
		{`{"s": "NaN and Infinity", "v": NaN}`, `{"s": "NaN and Infinity", "v": "NaN"}`},
		{`{"s": "a\"NaN", "v": -Infinity}`, `{"s": "a\"NaN", "v": "-Infinity"}`},
		{`{"s": "\\", "v": NaN}`, `{"s": "\\", "v": "NaN"}`},
	} {
		if got := string(sanitize([]byte(c.in))); got != c.want {
			t.Errorf("sanitize(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestNumber(t *testing.T) {
	var v struct{ A, B, C, D, E number }
	if err := decodeJSON([]byte(`{"A": -0.25, "B": null, "C": NaN, "D": -Infinity, "E": 1e-3}`), &v); err != nil {
		t.Fatal(err)
	}
	if !v.A.ok || v.A.v != -0.25 || v.B.ok || !math.IsNaN(v.C.v) || !math.IsInf(v.D.v, -1) || v.E.v != 1e-3 {
		t.Errorf("decoded %+v", v)
	}
	if err := json.Unmarshal([]byte(`{"A": "x"}`), &v); err == nil {
		t.Error("a string decoded as a number")
	}
	for _, c := range []struct {
		n  number
		ok bool
	}{
		{number{-0.5, true}, true},
		{number{0, true}, true},
		{number{1e-4, true}, true}, // rounding
		{number{0.5, true}, false},
		{number{0, false}, false},
		{number{math.NaN(), true}, false},
		{number{math.Inf(-1), true}, false},
		{number{-9999, true}, false},
	} {
		if _, err := logprob(c.n); (err == nil) != c.ok {
			t.Errorf("logprob(%+v): err %v", c.n, err)
		}
	}
}

func TestWireErrorText(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"error": {"message": "boom", "type": "BadRequestError", "param": null, "code": 400}}`, "boom"},
		{`{"object": "error", "message": "old vllm", "type": "BadRequestError", "code": 400}`, "old vllm"},
		{`{"error": "plain"}`, "plain"},
		{`{"detail": "not found"}`, "not found"},
		{`{"detail": [{"loc": ["body", "prompt"]}]}`, `[{"loc": ["body", "prompt"]}]`},
		{`{}`, ""},
	} {
		var w wireError
		if err := json.Unmarshal([]byte(c.body), &w); err != nil {
			t.Fatal(err)
		}
		if got := w.text(); got != c.want {
			t.Errorf("text(%s) = %q, want %q", c.body, got, c.want)
		}
	}
}

func TestOverlongPhrases(t *testing.T) {
	for msg, want := range map[string]bool{
		"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).": true,
		"The decoder prompt (length 5000) is longer than the maximum model length of 4096.":                                                      true,
		"The input (5000 tokens) is longer than the model's context length (4096 tokens).":                                                       true,
		"Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a total of 5000 tokens.":                 true,
		"top_k must be -1 (disable), or at least 1, got 0.":                                                                                      false,
	} {
		if isOverlong(msg) != want {
			t.Errorf("isOverlong(%q) = %v", msg, !want)
		}
	}
}

func TestDecodeNPY(t *testing.T) {
	table := remotetest.Routes(3, 2, 4, func(r, l, j int) int32 { return int32(r*8 + l*4 + j) })
	for _, dtype := range []string{"<i4", "<u4", "<i2", "<u2", "|u1", "|i1", "<i8", "<u8"} {
		shape, vals, err := decodeNPY(remotetest.NPY(table, dtype))
		if err != nil {
			t.Fatalf("%s: %v", dtype, err)
		}
		if !slices.Equal(shape, []int{3, 2, 4}) || len(vals) != 24 || vals[23] != 23 || vals[9] != 9 {
			t.Errorf("%s: shape %v vals %v", dtype, shape, vals)
		}
	}
	// Version 2.0 headers have a 4-byte length.
	v1 := remotetest.NPY(table, "<i4")
	hlen := int(v1[8]) | int(v1[9])<<8
	v2 := append([]byte("\x93NUMPY\x02\x00"), byte(hlen), byte(hlen>>8), 0, 0)
	v2 = append(v2, v1[10:]...)
	if shape, _, err := decodeNPY(v2); err != nil || len(shape) != 3 {
		t.Errorf("version 2: %v %v", shape, err)
	}
	good := string(remotetest.NPY(table, "<i4"))
	for name, b := range map[string]string{
		"magic":    "NUMPY" + good[6:],
		"short":    good[:12],
		"version":  good[:6] + "\x04" + good[7:],
		"fortran":  strings.Replace(good, "False", "True ", 1),
		"bigend":   strings.Replace(good, "'<i4'", "'>i4'", 1),
		"float":    strings.Replace(good, "'<i4'", "'<f4'", 1),
		"data":     good[:len(good)-1],
		"shape":    strings.Replace(good, "(3, 2, 4)", "(3, x, 4)", 1),
		"noshape":  strings.Replace(good, "'shape'", "'shope'", 1),
		"nodescr":  strings.Replace(good, "'descr'", "'dscr' ", 1),
		"overflow": strings.Replace(good, "(3, 2, 4)", "(9999999999, 2, 4)", 1),
	} {
		if _, _, err := decodeNPY([]byte(b)); err == nil {
			t.Errorf("%s: decoded a bad .npy", name)
		}
	}
	if _, _, err := decodeNPY(remotetest.NPY(remotetest.Routes(1, 1, 1, func(int, int, int) int32 { return -1 }), "<u8")); err == nil {
		t.Error("decoded a uint64 beyond int32")
	}
}

func TestDecodeRoutes(t *testing.T) {
	table := remotetest.Routes(3, 2, 2, func(r, l, j int) int32 { return int32(r + l + j) })
	b64 := base64.StdEncoding.EncodeToString(remotetest.Int32s(table))
	rt, err := decodeRawRoutes(b64, 3, 2)
	if err != nil || rt.rows != 3 || rt.layers != 2 || rt.k != 2 || rt.at(2, 1, 1) != 4 {
		t.Fatalf("raw: %+v %v", rt, err)
	}
	if _, err := decodeRawRoutes(b64, 5, 2); err == nil {
		t.Error("12 ids split into 5 rows")
	}
	if _, err := decodeRawRoutes("!!", 1, 1); err == nil {
		t.Error("decoded bad base64")
	}
	if _, err := decodeRawRoutes(base64.StdEncoding.EncodeToString([]byte{1, 2, 3}), 1, 1); err == nil {
		t.Error("decoded 3 bytes as int32")
	}
	np, err := decodeNPYRoutes(base64.RawStdEncoding.EncodeToString(remotetest.NPY(table, "<i4")))
	if err != nil || np.rows != 3 || np.at(2, 1, 1) != 4 {
		t.Fatalf("npy: %+v %v", np, err)
	}
	if _, err := decodeNPYRoutes(base64.StdEncoding.EncodeToString(remotetest.NPY(nil, "<i4")[:10])); err == nil {
		t.Error("decoded a cut .npy")
	}
	both, err := np.concat(np)
	if err != nil || both.rows != 6 || both.at(5, 1, 1) != 4 {
		t.Errorf("concat: %+v %v", both, err)
	}
	other := routeTable{rows: 1, layers: 1, k: 2, ids: []int32{0, 1}}
	if _, err := np.concat(other); err == nil {
		t.Error("concatenated routes of different shapes")
	}
}

func TestSSE(t *testing.T) {
	in := ": comment\r\nevent: x\r\ndata: {\"a\":1}\r\n\r\n" +
		"data:{\"b\":2}\n\n" +
		"data: line1\ndata: line2\nid: 3\n\n\n" +
		"data: [DONE]\n"
	s := newSSEReader(strings.NewReader(in))
	var got []string
	for {
		d, err := s.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(d))
	}
	want := []string{`{"a":1}`, `{"b":2}`, "line1\nline2", "[DONE]"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	s = newSSEReader(strings.NewReader("data: {\"a\":1}\n\ndata: {\"cho"))
	if _, err := s.next(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut line: %v", err)
	}
}

func TestLimitReader(t *testing.T) {
	r := &limitReader{r: strings.NewReader("12345"), left: 5}
	if b, err := io.ReadAll(r); err != nil || string(b) != "12345" {
		t.Errorf("exact limit: %q %v", b, err)
	}
	r = &limitReader{r: strings.NewReader("123456"), left: 5}
	if _, err := io.ReadAll(r); !errors.Is(err, errTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
}

func FuzzDecodeNPY(f *testing.F) {
	f.Add(remotetest.NPY(remotetest.Routes(2, 2, 2, func(r, l, j int) int32 { return int32(j) }), "<i4"))
	f.Add(remotetest.NPY(nil, "|u1"))
	f.Add([]byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<i4'}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		shape, vals, err := decodeNPY(b)
		if err != nil {
			return
		}
		n := 1
		for _, s := range shape {
			n *= s
		}
		if n != len(vals) {
			t.Fatalf("shape %v with %d values", shape, len(vals))
		}
	})
}

func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\r\ndata:x\r\ndata:y\r\n\r\n"))
	f.Add([]byte("data: {\"cho"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newSSEReader(bytes.NewReader(b))
		for range len(b) + 2 {
			if _, err := s.next(); err != nil {
				return
			}
		}
		t.Fatal("more events than bytes")
	})
}

func FuzzSanitize(f *testing.F) {
	f.Add([]byte(`{"a": [1, NaN, "NaN", -Infinity], "b": "x\"Infinity"}`))
	f.Add([]byte(`[Infinity]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := sanitize(b)
		if json.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("changed valid JSON %q to %q", b, out)
		}
	})
}

// FuzzResponses feeds arbitrary bodies to both response decoders: they may
// refuse them, never panic.
func FuzzResponses(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"logprobs":{"tokens":["token_id:5"],"token_logprobs":[-0.5]},"finish_reason":"length","token_ids":[5],"prompt_token_ids":[1]}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	f.Add([]byte(`{"output_ids":[5],"meta_info":{"finish_reason":{"type":"length"},"prompt_tokens":1,"completion_tokens":1,"output_token_logprobs":[[-0.5,5,null]]}}`))
	f.Add([]byte(`[{"output_ids":[],"meta_info":null}]`))
	f.Add([]byte(`{"error":{"message":"x","code":400}}`))
	v, err := NewVLLM("http://x", Options{VocabSize: 10, ContextLength: 8})
	if err != nil {
		f.Fatal(err)
	}
	s, err := NewSGLang("http://x", Options{VocabSize: 10, ContextLength: 8, Routing: true, ExpertsPerToken: 1})
	if err != nil {
		f.Fatal(err)
	}
	req := engine1()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range []*Engine{v, s} {
			pl, err := e.plan(req)
			if err != nil {
				t.Fatal(err)
			}
			g := &gen{e: e, req: req, pl: pl}
			if e.kind == vllm {
				err = e.vllmResponse(b, g)
			} else {
				err = e.sglangResponse(b, g)
			}
			if err == nil {
				_, _ = g.finish()
			}
		}
	})
}
