package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Tokenizer is a loaded byte-level BPE tokenizer. It is safe for concurrent
// use.
type Tokenizer struct {
	byteID  [256]int32       // id of each single-byte token
	merges  map[uint64]merge // (left id, right id) -> merge
	pieces  [][]byte         // id -> bytes it decodes to; nil for unused ids
	added   []addedToken     // added tokens, longest content first
	first   [256]bool        // first bytes of added tokens
	special map[int32]bool   // ids of special added tokens
	ids     map[string]int32 // byte-level token text -> id (vocab and added)
	whole   map[string]int32 // raw bytes -> id, only with ignore_merges
	nfc     bool             // NFC normalizer
	prefix  bool             // ByteLevel add_prefix_space
	split   pretokenizer     // the pre-tokenizer scanner
	cache   *cache           // piece -> ids
	size    int              // largest id + 1
}

type merge struct {
	rank int32 // position in the merges list: lower merges first
	id   int32 // id of the merged token
}

type addedToken struct {
	content        string
	id             int32
	special        bool
	lstrip, rstrip bool
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// Load reads a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// LoadSize returns the VocabSize of the tokenizer in a tokenizer.json file
// (the largest id of model.vocab and added_tokens, plus one) without
// building it: a model checkpoint reads its tokenizer's size this way to
// know which of its ids can be decoded (model.Load). A file Load accepts
// gives the same number; LoadSize checks only the ids.
func LoadSize(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	var f struct {
		AddedTokens []addedJSON `json:"added_tokens"`
		Model       *struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("%s: %w: %v", path, ErrFormat, err)
	}
	if f.Model == nil {
		return 0, fmt.Errorf("%s: %w: no model", path, ErrFormat)
	}
	var vocab map[string]int32
	if !isNull(f.Model.Vocab) {
		if vocab, err = parseVocab(f.Model.Vocab); err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	n, err := vocabSize(vocab, f.AddedTokens)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// vocabSize is the number of ids of a tokenizer with these vocabulary and
// added tokens: the largest id plus one.
func vocabSize(vocab map[string]int32, added []addedJSON) (int, error) {
	if len(vocab) == 0 {
		return 0, fmt.Errorf("%w: empty model.vocab", ErrFormat)
	}
	maxID := int32(-1)
	for tok, id := range vocab {
		if id < 0 {
			return 0, fmt.Errorf("%w: vocab token %q has negative id %d", ErrFormat, tok, id)
		}
		maxID = max(maxID, id)
	}
	for _, a := range added {
		if a.ID == nil || *a.ID < 0 {
			return 0, fmt.Errorf("%w: added token %q has no valid id", ErrFormat, a.Content)
		}
		maxID = max(maxID, *a.ID)
	}
	if maxID >= 1<<24 {
		return 0, fmt.Errorf("%w: token id %d is too large", ErrFormat, maxID)
	}
	return int(maxID) + 1, nil
}

// addedJSON is one entry of added_tokens.
type addedJSON struct {
	ID         *int32 `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
}

type fileJSON struct {
	AddedTokens  []addedJSON     `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        *struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		ByteFallback            bool            `json:"byte_fallback"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	} `json:"model"`
}

type typed struct {
	Type string `json:"type"`
}

// Parse reads the contents of a tokenizer.json file.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	m := f.Model
	if m == nil {
		return nil, fmt.Errorf("%w: no model", ErrFormat)
	}
	if m.Type != "BPE" && m.Type != "" {
		return nil, fmt.Errorf("%w: model type %q (want BPE)", ErrUnsupported, m.Type)
	}
	if m.ByteFallback {
		return nil, fmt.Errorf("%w: model.byte_fallback", ErrUnsupported)
	}
	if p := m.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("%w: model.continuing_subword_prefix %q", ErrUnsupported, *p)
	}
	if p := m.EndOfWordSuffix; p != nil && *p != "" {
		return nil, fmt.Errorf("%w: model.end_of_word_suffix %q", ErrUnsupported, *p)
	}
	var vocab map[string]int32
	if !isNull(m.Vocab) {
		var err error
		if vocab, err = parseVocab(m.Vocab); err != nil {
			return nil, err
		}
	}
	size, err := vocabSize(vocab, f.AddedTokens)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{ids: make(map[string]int32, len(vocab)+len(f.AddedTokens)), cache: newCache()}
	if err := t.setNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.setPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}

	// Vocabulary: id -> bytes, and the single-byte tokens.
	t.size = size
	t.pieces = make([][]byte, t.size)
	owner := make([]string, t.size)
	for tok, id := range vocab {
		if t.pieces[id] != nil {
			a, b := owner[id], tok
			if b < a {
				a, b = b, a
			}
			return nil, fmt.Errorf("%w: vocab tokens %q and %q share id %d", ErrFormat, a, b, id)
		}
		b, ok := byteLevelBytes(tok)
		if !ok {
			b = []byte(tok) // what Hugging Face's ByteLevel decoder does too
		}
		t.pieces[id], owner[id] = b, tok
		t.ids[tok] = id
	}
	for c := 0; c < 256; c++ {
		tok := string(byteToRune[c])
		id, ok := vocab[tok]
		if !ok {
			return nil, fmt.Errorf("%w: vocab lacks the byte-level token %q for byte 0x%02x", ErrFormat, tok, c)
		}
		t.byteID[c] = id
	}

	// Merges, in rank order.
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	t.merges = make(map[uint64]merge, len(pairs))
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		c, okC := vocab[p[0]+p[1]]
		switch {
		case !okA || !okB:
			return nil, fmt.Errorf("%w: merge %d %q uses a token not in the vocab", ErrFormat, rank, p[0]+" "+p[1])
		case !okC:
			return nil, fmt.Errorf("%w: merge %d %q makes %q, which is not in the vocab", ErrFormat, rank, p[0]+" "+p[1], p[0]+p[1])
		}
		k := pairKey(a, b)
		if _, dup := t.merges[k]; !dup { // the first (lowest) rank wins
			t.merges[k] = merge{rank: int32(rank), id: c}
		}
	}

	// Added tokens.
	t.special = map[int32]bool{}
	seen := map[int32]bool{}
	for _, a := range f.AddedTokens {
		id := *a.ID
		if a.Content == "" {
			return nil, fmt.Errorf("%w: added token %d has empty content", ErrFormat, id)
		}
		if v, ok := t.ids[a.Content]; ok && v != id {
			return nil, fmt.Errorf("%w: added token %q has id %d but is already id %d", ErrFormat, a.Content, id, v)
		}
		if t.pieces[id] != nil && owner[id] != a.Content {
			return nil, fmt.Errorf("%w: added token %q reuses id %d of %q", ErrFormat, a.Content, id, owner[id])
		}
		if seen[id] {
			continue // listed twice
		}
		seen[id] = true
		t.pieces[id], owner[id] = []byte(a.Content), a.Content
		t.ids[a.Content] = id
		t.added = append(t.added, addedToken{content: a.Content, id: id, special: a.Special, lstrip: a.LStrip, rstrip: a.RStrip})
		t.first[a.Content[0]] = true
		if a.Special {
			t.special[id] = true
		}
	}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].content) > len(t.added[j].content) })

	if m.IgnoreMerges {
		t.whole = make(map[string]int32, len(vocab))
		for _, id := range vocab {
			t.whole[string(t.pieces[id])] = id
		}
	}
	return t, nil
}

// parseMerges reads model.merges in either form: ["a b", ...] (tokenizers
// before 0.20) or [["a", "b"], ...].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if strs, pairs, ok := scanMerges(raw); ok {
		if strs == nil {
			return checkPairs(pairs)
		}
		return splitMerges(strs)
	}
	if i := bytes.IndexAny(raw[1:], "[\"]"); raw[0] == '[' && i >= 0 && raw[1+i] == '[' {
		var pairs [][]string
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, fmt.Errorf("%w: model.merges is not a list of [\"a\", \"b\"] pairs: %v", ErrFormat, err)
		}
		out := make([][2]string, len(pairs))
		for i, p := range pairs {
			if len(p) != 2 {
				return nil, fmt.Errorf("%w: merge %d %q is not two tokens", ErrFormat, i, p)
			}
			out[i] = [2]string{p[0], p[1]}
		}
		return checkPairs(out)
	}
	var items []string
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: model.merges is neither a list of \"a b\" strings nor of [\"a\", \"b\"] pairs: %v", ErrFormat, err)
	}
	return splitMerges(items)
}

// checkPairs refuses empty halves.
func checkPairs(pairs [][2]string) ([][2]string, error) {
	for i, p := range pairs {
		if p[0] == "" || p[1] == "" {
			return nil, fmt.Errorf("%w: merge %d %q is not two tokens", ErrFormat, i, p[:])
		}
	}
	return pairs, nil
}

// splitMerges splits "a b" merges.
func splitMerges(items []string) ([][2]string, error) {
	out := make([][2]string, len(items))
	for i, s := range items {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return nil, fmt.Errorf("%w: merge %d %q is not two tokens separated by one space", ErrFormat, i, s)
		}
		out[i] = [2]string{a, b}
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func (t *Tokenizer) setNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("%w: normalizer: %v", ErrFormat, err)
	}
	switch n.Type {
	case "NFC":
		t.nfc = true
		return nil
	case "Sequence":
		for _, sub := range n.Normalizers {
			if err := t.setNormalizer(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: normalizer type %q (only NFC is implemented)", ErrUnsupported, n.Type)
}

type preJSON struct {
	Type          string            `json:"type"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// setPreTokenizer accepts the two shapes of the family: a ByteLevel
// pre-tokenizer (with the GPT-2 regex when use_regex is on, the default), or
// a Sequence of a Split on the Qwen2 (or Llama 3) regex and a ByteLevel
// without regex.
func (t *Tokenizer) setPreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no pre_tokenizer (want ByteLevel)", ErrUnsupported)
	}
	var p preJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("%w: pre_tokenizer: %v", ErrFormat, err)
	}
	steps := []preJSON{p}
	if p.Type == "Sequence" {
		steps = steps[:0]
		for _, sub := range p.Pretokenizers {
			var s preJSON
			if err := json.Unmarshal(sub, &s); err != nil {
				return fmt.Errorf("%w: pre_tokenizer: %v", ErrFormat, err)
			}
			steps = append(steps, s)
		}
	}
	for i, s := range steps {
		switch s.Type {
		case "Split":
			if i != 0 || t.split != nil {
				return fmt.Errorf("%w: pre_tokenizer Split must come first", ErrUnsupported)
			}
			switch {
			case s.Pattern.Regex != nil && *s.Pattern.Regex == qwen2Pattern:
				t.split = qwen2Next
			case s.Pattern.Regex != nil && *s.Pattern.Regex == llama3Pattern:
				t.split = llama3Next
			default:
				return fmt.Errorf("%w: pre_tokenizer Split pattern (only the Qwen2 and Llama 3 regexes are implemented)", ErrUnsupported)
			}
			if s.Behavior != "Isolated" || s.Invert {
				return fmt.Errorf("%w: pre_tokenizer Split behavior %q invert %v (want Isolated, false)", ErrUnsupported, s.Behavior, s.Invert)
			}
		case "ByteLevel":
			if i != len(steps)-1 {
				return fmt.Errorf("%w: pre_tokenizer ByteLevel must come last", ErrUnsupported)
			}
			useRegex := s.UseRegex == nil || *s.UseRegex
			switch {
			case useRegex && t.split != nil:
				return fmt.Errorf("%w: pre_tokenizer Split followed by ByteLevel with use_regex", ErrUnsupported)
			case useRegex:
				t.split = gpt2Next
			case t.split == nil:
				t.split = wholeNext
			}
			t.prefix = s.AddPrefixSpace
		default:
			return fmt.Errorf("%w: pre_tokenizer type %q", ErrUnsupported, s.Type)
		}
	}
	if len(steps) == 0 || steps[len(steps)-1].Type != "ByteLevel" {
		return fmt.Errorf("%w: pre_tokenizer does not end with ByteLevel", ErrUnsupported)
	}
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var d typed
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%w: decoder: %v", ErrFormat, err)
	}
	if d.Type != "ByteLevel" {
		return fmt.Errorf("%w: decoder type %q (want ByteLevel)", ErrUnsupported, d.Type)
	}
	return nil
}

// VocabSize returns the number of token ids: the largest id plus one.
func (t *Tokenizer) VocabSize() int { return t.size }

// TokenID returns the id of a token given as its tokenizer.json text (the
// byte-level form for vocabulary tokens, the content for added tokens).
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	id, ok := t.ids[token]
	return id, ok
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.special[id] }
