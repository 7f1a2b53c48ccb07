package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// AddedToken is a token that Train adds after the learned vocabulary.
type AddedToken struct {
	Content string
	// Special tokens are recognised by EncodeSpecial only; others by Encode
	// as well.
	Special bool
}

// DefaultAddedTokens are the tokens Train adds when TrainOptions.Added is
// nil: Qwen3's end-of-text and chat tokens (special) and its tool-call and
// reasoning tags (not special), so that Qwen3 chat templates apply unchanged.
var DefaultAddedTokens = []AddedToken{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
	{"<tool_call>", false}, {"</tool_call>", false},
	{"<tool_response>", false}, {"</tool_response>", false},
	{"<think>", false}, {"</think>", false},
}

// TrainOptions configures Train.
type TrainOptions struct {
	// VocabSize is the number of ids of the result: 256 byte tokens, the
	// merges, and the added tokens. A corpus with too few distinct pairs
	// gives a smaller vocabulary.
	VocabSize int
	// Added lists the added tokens, numbered after the merges. Defaults to
	// DefaultAddedTokens.
	Added []AddedToken
	// MinFrequency stops training when the most frequent pair occurs fewer
	// times. Defaults to 2.
	MinFrequency int
}

// Trainer learns a byte-level BPE from text. Add the corpus, then call
// Train. It uses the Qwen2 pre-tokenizer and NFC normalization and writes
// them into the tokenizer.json it produces.
type Trainer struct {
	words map[string]int64 // pre-tokenized piece -> occurrences
	added []AddedToken     // tokens cut out of the corpus before counting
}

// NewTrainer returns an empty trainer; added lists the tokens to cut out of
// the corpus text (nil means DefaultAddedTokens).
func NewTrainer(added []AddedToken) *Trainer {
	if added == nil {
		added = DefaultAddedTokens
	}
	return &Trainer{words: map[string]int64{}, added: added}
}

// Add counts the pieces of text. Occurrences of added tokens are cut out, so
// they do not shape the merges.
func (tr *Trainer) Add(text string) {
	text = norm.NFC.String(text)
	for text != "" {
		cut, skip := len(text), 0 // the earliest added token, if any
		for _, a := range tr.added {
			if i := strings.Index(text[:min(len(text), cut+len(a.Content))], a.Content); i >= 0 && i < cut {
				cut, skip = i, len(a.Content)
			}
		}
		split(qwen2Next, text[:cut], func(p string) { tr.words[p]++ })
		text = text[cut+skip:]
	}
}

// Train learns merges until the vocabulary has opts.VocabSize ids and
// returns the tokenizer.json. The result depends only on the text added
// (not on its order within the corpus): ties between equally frequent pairs
// go to the pair of lower token ids.
func (tr *Trainer) Train(opts TrainOptions) ([]byte, error) {
	if opts.Added == nil {
		opts.Added = tr.added
	}
	if opts.MinFrequency <= 0 {
		opts.MinFrequency = 2
	}
	if min := 256 + len(opts.Added); opts.VocabSize < min {
		return nil, fmt.Errorf("%w: vocabulary size %d is below %d (256 bytes and %d added tokens)", ErrTrain, opts.VocabSize, min, len(opts.Added))
	}
	seen := map[string]bool{}
	for _, a := range opts.Added {
		if a.Content == "" || seen[a.Content] {
			return nil, fmt.Errorf("%w: added token %q is empty or repeated", ErrTrain, a.Content)
		}
		seen[a.Content] = true
	}

	// Token ids: the 256 bytes in byte-level character order, then merges.
	var tokens [][]byte
	byteID := [256]int32{}
	known := map[string]int32{}
	for _, b := range byteAlphabet() {
		byteID[b] = int32(len(tokens))
		known[string([]byte{b})] = byteID[b]
		tokens = append(tokens, []byte{b})
	}

	keys := make([]string, 0, len(tr.words))
	for w := range tr.words {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	words := make([][]int32, len(keys))
	counts := make([]int64, len(keys))
	for i, w := range keys {
		counts[i] = tr.words[w]
		words[i] = make([]int32, len(w))
		for j := 0; j < len(w); j++ {
			words[i][j] = byteID[w[j]]
		}
	}

	pairCount := map[uint64]int64{}
	where := map[uint64][]int32{}
	for i, w := range words {
		for j := 0; j+1 < len(w); j++ {
			k := pairKey(w[j], w[j+1])
			if l := where[k]; len(l) == 0 || l[len(l)-1] != int32(i) {
				where[k] = append(where[k], int32(i))
			}
			pairCount[k] += counts[i]
		}
	}
	h := &pairHeap{}
	for k, c := range pairCount {
		h.push(pairEntry{c, k})
	}

	var merges [][2]int32
	target := opts.VocabSize - len(opts.Added)
	for len(tokens) < target && h.len() > 0 {
		top := h.pop()
		if c := pairCount[top.key]; c != top.count {
			if c > 0 {
				h.push(pairEntry{c, top.key})
			}
			continue
		}
		if top.count < int64(opts.MinFrequency) {
			break
		}
		a, b := int32(top.key>>32), int32(uint32(top.key))
		joined := append(slices.Clip(tokens[a]), tokens[b]...)
		id, ok := known[string(joined)]
		if !ok { // another pair may already have made the same bytes
			id = int32(len(tokens))
			tokens = append(tokens, joined)
			known[string(joined)] = id
		}
		merges = append(merges, [2]int32{a, b})

		fresh := map[uint64]bool{}
		for _, wi := range where[top.key] {
			w := words[wi]
			if !hasPair(w, a, b) {
				continue
			}
			c := counts[wi]
			for j := 0; j+1 < len(w); j++ {
				pairCount[pairKey(w[j], w[j+1])] -= c
			}
			w = mergePair(w, a, b, id)
			words[wi] = w
			for j := 0; j+1 < len(w); j++ {
				k := pairKey(w[j], w[j+1])
				pairCount[k] += c
				if w[j] == id || w[j+1] == id {
					fresh[k] = true
					if l := where[k]; len(l) == 0 || l[len(l)-1] != wi {
						where[k] = append(where[k], wi)
					}
				}
			}
		}
		delete(where, top.key)
		delete(pairCount, top.key)
		for k := range fresh {
			if c := pairCount[k]; c > 0 {
				h.push(pairEntry{c, k})
			}
		}
	}
	return writeJSON(tokens, merges, opts.Added), nil
}

func hasPair(w []int32, a, b int32) bool {
	for j := 0; j+1 < len(w); j++ {
		if w[j] == a && w[j+1] == b {
			return true
		}
	}
	return false
}

// mergePair replaces each non-overlapping (a, b), left to right, with id.
func mergePair(w []int32, a, b, id int32) []int32 {
	out := w[:0]
	for j := 0; j < len(w); j++ {
		if j+1 < len(w) && w[j] == a && w[j+1] == b {
			out = append(out, id)
			j++
		} else {
			out = append(out, w[j])
		}
	}
	return out
}

type pairEntry struct {
	count int64
	key   uint64
}

// pairHeap is a max-heap by count, then by lower pair key.
type pairHeap struct{ e []pairEntry }

func (h *pairHeap) len() int { return len(h.e) }

func (h *pairHeap) before(i, j int) bool {
	a, b := h.e[i], h.e[j]
	return a.count > b.count || (a.count == b.count && a.key < b.key)
}

func (h *pairHeap) push(x pairEntry) {
	h.e = append(h.e, x)
	for i := len(h.e) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.before(i, p) {
			break
		}
		h.e[i], h.e[p] = h.e[p], h.e[i]
		i = p
	}
}

func (h *pairHeap) pop() pairEntry {
	top := h.e[0]
	last := len(h.e) - 1
	h.e[0] = h.e[last]
	h.e = h.e[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.e) && h.before(l, m) {
			m = l
		}
		if r < len(h.e) && h.before(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.e[i], h.e[m] = h.e[m], h.e[i]
		i = m
	}
	return top
}

// writeJSON renders a tokenizer.json in the layout of Qwen3's, with the
// vocabulary in id order.
func writeJSON(tokens [][]byte, merges [][2]int32, added []AddedToken) []byte {
	var b bytes.Buffer
	q := func(s string) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s) // a string always encodes
		return strings.TrimSuffix(buf.String(), "\n")
	}
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for i, a := range added {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": %v}",
			len(tokens)+i, q(a.Content), a.Special)
	}
	b.WriteString("\n  ],\n  \"normalizer\": {\"type\": \"NFC\"},\n")
	fmt.Fprintf(&b, "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"Isolated\", \"invert\": false}, %s]},\n", q(qwen2Pattern), byteLevelJSON)
	fmt.Fprintf(&b, "  \"post_processor\": %s,\n  \"decoder\": %s,\n", byteLevelJSON, byteLevelJSON)
	b.WriteString("  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n    \"vocab\": {")
	for id, tok := range tokens {
		if id > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n      %s: %d", q(byteLevelString(tok)), id)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n      [%s, %s]", q(byteLevelString(tokens[m[0]])), q(byteLevelString(tokens[m[1]])))
	}
	b.WriteString("\n    ]\n  }\n}\n")
	return b.Bytes()
}

const byteLevelJSON = `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`
