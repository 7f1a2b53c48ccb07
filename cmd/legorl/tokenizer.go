package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/legorl/legorl/policy/tokenizer"
)

// runTokenizer dispatches `legorl tokenizer encode|decode|train`.
func runTokenizer(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	subs := map[string]func(context.Context, []string, io.Reader, io.Writer, io.Writer) error{
		"encode": tokenizerEncode,
		"decode": tokenizerDecode,
		"train":  tokenizerTrain,
	}
	if len(args) == 0 {
		return errors.New("missing subcommand: want encode, decode or train (see legorl tokenizer -h)")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: legorl tokenizer encode|decode|train [flags]   (legorl tokenizer SUB -h for its flags)")
		fmt.Fprintln(stderr, "  encode  read text on stdin, print its token ids as a JSON array")
		fmt.Fprintln(stderr, "  decode  read a JSON array of token ids on stdin, print the text")
		fmt.Fprintln(stderr, "  train   learn a byte-level BPE tokenizer.json from corpus files")
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		return fmt.Errorf("unknown subcommand %q: want encode, decode or train", args[0])
	}
	return sub(ctx, args[1:], os.Stdin, stdout, stderr)
}

func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		return nil, errors.New("--tokenizer is required (a tokenizer.json file)")
	}
	return tokenizer.Load(path)
}

func tokenizerEncode(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("tokenizer encode", stderr)
	path := fs.String("tokenizer", "", "tokenizer.json file (required)")
	special := fs.Bool("special", false, "recognise special tokens such as <|im_start|> in the text (default: encode them as plain text)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	tok, err := loadTokenizer(*path)
	if err != nil {
		return err
	}
	text, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	ids := tok.AppendEncode(nil, string(text), *special)
	out, _ := json.Marshal(ids) // []int32 always marshals
	if ids == nil {
		out = []byte("[]")
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

func tokenizerDecode(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("tokenizer decode", stderr)
	path := fs.String("tokenizer", "", "tokenizer.json file (required)")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	tok, err := loadTokenizer(*path)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	var ids []int32
	if err := json.Unmarshal(data, &ids); err != nil {
		return fmt.Errorf("stdin is not a JSON array of token ids: %v", err)
	}
	text, err := tok.Decode(ids)
	if err != nil {
		return err
	}
	_, err = stdout.Write(text)
	return err
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func tokenizerTrain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("tokenizer train", stderr)
	vocab := fs.Int("vocab", 0, "vocabulary size of the result, added tokens included (required; at least 265)")
	var corpus stringList
	fs.Var(&corpus, "corpus", "corpus file or folder (read recursively); repeat the flag or list more files after the flags")
	out := fs.String("out", "", "tokenizer.json to write (required); written whole or not at all")
	minFreq := fs.Int("min-frequency", 2, "stop when the most frequent pair occurs fewer times")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stderr)
			return err
		}
		return fmt.Errorf("%v (see %s -h)", err, fs.Name())
	}
	corpus = append(corpus, fs.Args()...)
	if *vocab <= 0 || *out == "" || len(corpus) == 0 {
		return errors.New("--vocab, --corpus and --out are required (see legorl tokenizer train -h)")
	}
	files, err := corpusFiles(corpus)
	if err != nil {
		return err
	}
	start := time.Now()
	tr := tokenizer.NewTrainer(nil)
	var size int64
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("corpus: %w", err)
		}
		size += int64(len(data))
		tr.Add(string(data))
	}
	data, err := tr.Train(tokenizer.TrainOptions{VocabSize: *vocab, MinFrequency: *minFreq})
	if err != nil {
		return err
	}
	tok, err := tokenizer.Parse(data)
	if err != nil {
		return fmt.Errorf("the trained tokenizer does not load back: %w", err)
	}
	if err := writeOutput(*out, stdout, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	}); err != nil {
		return err
	}
	if *out != "-" {
		_ = os.Chmod(*out, 0o644) // a data file for others to read, not a secret
	}
	note := ""
	if tok.VocabSize() < *vocab {
		note = fmt.Sprintf(" (the corpus has too few repeated pairs for %d)", *vocab)
	}
	fmt.Fprintf(stderr, "legorl tokenizer train: %d ids%s from %d files (%.1f MB) in %s -> %s\n",
		tok.VocabSize(), note, len(files), float64(size)/1e6, time.Since(start).Round(time.Millisecond), *out)
	return nil
}

// corpusFiles expands folders into the regular files under them, sorted,
// so the training input does not depend on the order the file system lists.
func corpusFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}
