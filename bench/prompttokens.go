//go:build ignore

// prompttokens: prompt tokens per model call of demonstrations, with a
// tokenizer of the given vocabulary trained on them (as legorl run's
// init does).
// Run: go run bench/prompttokens.go VOCAB DEMOS.jsonl...
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/trainer"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "prompttokens:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 3 {
		fail(fmt.Errorf("usage: go run bench/prompttokens.go VOCAB DEMOS.jsonl..."))
	}
	vocab, err := strconv.Atoi(os.Args[1])
	if err != nil || vocab < 256 {
		fail(fmt.Errorf("vocabulary %q: want a number of at least 256", os.Args[1]))
	}
	for _, path := range os.Args[2:] {
		demos, _, err := trainer.ReadDemos(path)
		if err != nil {
			fail(err)
		}
		corpus, _ := os.ReadFile(path)
		tr := tokenizer.NewTrainer(nil)
		tr.Add(string(corpus))
		js, err := tr.Train(tokenizer.TrainOptions{VocabSize: vocab, MinFrequency: 2})
		if err != nil {
			fail(err)
		}
		tok, err := tokenizer.Parse(js)
		if err != nil {
			fail(err)
		}
		for _, d := range demos {
			seqs, err := trainer.DemoSequences(tok, d)
			if err != nil {
				fail(err)
			}
			fmt.Printf("%s %s calls %d prompt tokens", path, d.InstanceID, len(seqs))
			for _, s := range seqs {
				fmt.Printf(" %d(+%d)", len(s.Prompt), len(s.Completion))
			}
			fmt.Println()
		}
	}
}
