package tokenizer_test

import (
	"fmt"
	"log"
	"path/filepath"

	"github.com/legorl/legorl/policy/tokenizer"
)

func Example() {
	tok, err := tokenizer.Load(filepath.Join("testdata", "small", "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.EncodeSpecial("<|im_start|>user\nfunc main() {}<|im_end|>")
	text, err := tok.Decode(ids)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ids) < 20, string(text))
	// Output: true <|im_start|>user
	// func main() {}<|im_end|>
}

func ExampleStreamDecoder() {
	tok, err := tokenizer.Load(filepath.Join("testdata", "small", "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	d := tok.NewStreamDecoder()
	for _, id := range tok.Encode("日本") { // several byte tokens per character
		piece, _ := d.Add(id)
		fmt.Printf("%q ", piece)
	}
	fmt.Printf("%q\n", d.Flush())
	// Output: "" "" "日" "" "" "本" ""
}

func ExampleTrainer() {
	tr := tokenizer.NewTrainer(nil)
	tr.Add("the cat sat on the mat; the cat ate the rat")
	data, err := tr.Train(tokenizer.TrainOptions{VocabSize: 300})
	if err != nil {
		log.Fatal(err)
	}
	tok, err := tokenizer.Parse(data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tok.Encode(" the cat")))
	// Output: 2
}
