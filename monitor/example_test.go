package monitor_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/legorl/legorl/monitor"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// A run's rollouts, committed as the pipeline commits them, seen through
// the reward panel's JSON data and served as the dashboard.
func ExampleMonitor_Panel() {
	dir, err := os.MkdirTemp("", "legorl-monitor-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := storage.NewFileStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i, it := range synth.Run(synth.Config{RunID: "r1", Seed: 1, Iterations: 2}) {
		ref := storage.ManifestRef{RunID: "r1", Iteration: i, Stage: "rollout"}
		foot := schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableRollouts, RunID: "r1", ConfigHash: "example", CodeVersion: "example"}
		e, err := storage.WriteFile(ctx, st, ref.DataKey("rollouts", "0"), foot, it.Rollouts)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := storage.Commit(ctx, st, ref, []storage.FileEntry{e}); err != nil {
			log.Fatal(err)
		}
	}
	m, err := monitor.New(st, monitor.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := m.Panel(ctx, "r1", "reward", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range res.Data.(monitor.RewardData).Series[0].Points {
		fmt.Printf("iteration %d: %d of %d completed rollouts solved, %d masked\n", p.Iteration, p.Solved, p.Completed, p.Masked)
	}
	// The panels that need other tables say what is missing.
	res, _ = m.Panel(ctx, "r1", "training", nil)
	fmt.Println(res.Status+":", res.Problems[0].Reason)

	srv := httptest.NewServer(m.Handler()) // what legorl monitor serves
	defer srv.Close()
	// Output:
	// iteration 0: 5 of 14 completed rollouts solved, 2 masked
	// iteration 1: 5 of 14 completed rollouts solved, 2 masked
	// missing: run r1 has no committed train_steps files
}
