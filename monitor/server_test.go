package monitor

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestHandler: every page and endpoint answers; bad input gives a page
// that says what is missing, or a 404 for what does not exist, never a 500.
func TestHandler(t *testing.T) {
	m, badKey := newTestMonitor(t, Options{})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	tests := []struct {
		path string
		code int
		want []string
	}{
		{"/", 200, []string{`data-run="fixture"`, `data-run="collapse"`, `data-run="broken"`}},
		{"/runs/fixture", 200, []string{`data-panel="reward"`, `data-panel="rollouts"`, `fixture-i2-t000-g0`}},
		{"/runs/broken", 200, []string{`data-panel="training" data-status="missing"`, badKey, "checksum mismatch", "manifest unreadable"}},
		{"/runs/later", 200, []string{"has no committed manifest yet", `data-status="missing"`}},
		{"/runs/..%2Fetc", 404, []string{"unknown run"}},
		{"/runs/fixture/panels/tools", 200, []string{`<section class="panel st-ok" id="panel-tools"`, `data-alarm="none"`}},
		{"/runs/collapse/panels/tools", 200, []string{`data-alarm="tool-collapse"`}},
		{"/runs/fixture/panels/nope", 404, []string{"unknown panel"}},
		{"/runs/fixture/rollouts/fixture-i1-t000-g0", 200, []string{`data-k="forks">1<`, "fork after 10 shared tokens"}},
		{"/runs/fixture/rollouts/nope", 404, []string{"unknown rollout"}},
		{"/runs/broken/rollouts/broken-i1-t005-g3", 200, []string{"checksum mismatch"}},
		{"/api/runs", 200, []string{`"run_id": "fixture"`}},
		{"/api/runs/fixture/status", 200, []string{`"version": 1`}},
		{"/api/runs/fixture/panels/reward", 200, []string{`"status": "ok"`, `"harness": "all"`}},
		{"/api/runs/broken/panels/training", 200, []string{`"status": "missing"`, "no committed train_steps files"}},
		{"/api/runs/fixture/panels/nope", 404, []string{"unknown panel"}},
		{"/api/runs/fixture/rollouts/fixture-i0-t001-g2", 200, []string{`"rollout_id": "fixture-i0-t001-g2"`}},
		{"/static/app.js", 200, []string{"live refresh"}},
		{"/static/app.css", 200, []string{"section.panel"}},
	}
	for _, tc := range tests {
		code, body := get(t, srv, tc.path)
		if code != tc.code {
			t.Errorf("%s: HTTP %d, want %d: %.300s", tc.path, code, tc.code, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body lacks %q", tc.path, w)
			}
		}
	}
	// Every panel of every run, as JSON: it decodes, and names its status.
	for _, run := range []string{runFixture, runCollapse, runBroken, "later"} {
		for _, id := range PanelIDs() {
			code, body := get(t, srv, "/api/runs/"+run+"/panels/"+id)
			var res PanelResult
			if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Status == "" {
				t.Errorf("%s/%s: HTTP %d, %v: %.200s", run, id, code, err, body)
			}
		}
	}
}

func TestOneRunOnly(t *testing.T) {
	m, _ := newTestMonitor(t, Options{Run: runFixture})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/runs/fixture" {
		t.Errorf("/: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := get(t, srv, "/runs/collapse"); code != 404 {
		t.Errorf("another run: HTTP %d", code)
	}
	if code, body := get(t, srv, "/api/runs"); code != 200 || !strings.Contains(body, "fixture") || strings.Contains(body, "collapse") {
		t.Errorf("/api/runs: %d %s", code, body)
	}
}

// TestConcurrentRequests: pages read while a run commits (run with -race).
func TestConcurrentRequests(t *testing.T) {
	st, _ := newFixtureStore(t)
	m, err := New(st, Options{Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				path := []string{"/runs/fixture", "/api/runs", "/api/runs/fixture/status", "/runs/fixture/panels/logprobs",
					"/api/runs/fixture/panels/response", "/runs/fixture/rollouts/fixture-i0-t000-g0"}[(g+i)%6]
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s: HTTP %d", path, resp.StatusCode)
				}
			}
		}(g)
	}
	writeIteration(t, st, runFixture, 3, fixtureRun(runFixture)[3])
	wg.Wait()
	d := panelData(t, m, runFixture, "reward", nil).Data.(RewardData)
	if len(d.Iterations) != 4 {
		t.Errorf("iterations %v", d.Iterations)
	}
}
