// Package tokenizer reads and writes Hugging Face tokenizer.json files of the
// byte-level BPE family (GPT-2, Qwen2, Qwen3) and encodes text to token ids
// and back, exactly as the reference implementations do.
//
// Encoding runs the pipeline of tokenizer.json: added tokens are split off
// first (special ones only when special parsing is on), the remaining text is
// NFC-normalized when the file asks for it, cut into pieces by the
// pre-tokenizer (a hand-written scanner equivalent to the Qwen2, Llama 3 or GPT-2
// regex, which Go's regexp cannot express because of its lookahead), and each
// piece's bytes are merged by BPE rank. Decoding concatenates the bytes of the
// tokens, so a partial sequence of ids decodes to partial UTF-8;
// StreamDecoder holds such bytes back until the character is complete.
//
// Trainer builds a new byte-level BPE of a chosen size from a corpus and writes
// a tokenizer.json in the layout of Qwen3's own, which this package and
// transformers.js read (tested); Hugging Face tokenizers reads that layout.
//
// Character classes follow Hugging Face tokenizers (Oniguruma): \s is the
// Unicode White_Space property (it includes U+0085 and excludes U+FEFF, where
// JavaScript's \s does the opposite), and the contraction group (?i:'s|...)
// matches ASCII letters only, as transformers.js rewrites it.
package tokenizer

import "errors"

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrFormat reports a tokenizer.json that cannot be read or is
	// inconsistent (a merge of unknown tokens, a duplicate id, ...).
	ErrFormat = errors.New("tokenizer: bad tokenizer.json")
	// ErrUnsupported reports a valid tokenizer.json that uses a feature
	// this package does not implement (another model type, normalizer or
	// pre-tokenizer).
	ErrUnsupported = errors.New("tokenizer: unsupported tokenizer.json")
	// ErrUnknownID reports a token id outside the vocabulary.
	ErrUnknownID = errors.New("tokenizer: unknown token id")
	// ErrTrain reports a training request that cannot be met.
	ErrTrain = errors.New("tokenizer: train")
)
