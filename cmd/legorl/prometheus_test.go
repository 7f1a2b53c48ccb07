package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prometheusBinary finds Prometheus: $LEGORL_PROMETHEUS, then PATH (make
// tools installs Debian's). Missing, the test fails: it is part of make test.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LEGORL_PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found (make tools installs Debian's; or set LEGORL_PROMETHEUS)")
	}
	return p
}

var regexpMetric = regexp.MustCompile(`legorl_[a-z_]+`)

// waitFor polls cond every 200 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(timeout); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promQuery runs an instant PromQL query; it fails the test unless
// Prometheus says success, and returns each series' value by its labels
// (k=v joined by commas, sorted; instance and __name__ left out).
func promQuery(t *testing.T, base, q string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %q: status %q, error %q (%v)", q, r.Status, r.Error, err)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		var labels []string
		for k, val := range s.Metric {
			if k != "instance" && k != "__name__" {
				labels = append(labels, k+"="+val)
			}
		}
		sort.Strings(labels)
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// TestPrometheus: Debian's Prometheus scrapes `legorl serve` and `legorl
// run --metrics-addr`; PromQL over the documented series returns what the
// test did (3 chat calls, their tokens; the loop's rollouts, updates and
// gate), and every query of the Grafana dashboard
// (monitor/grafana/legorl.json) evaluates on the same Prometheus.
func TestPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// legorl serve, its address from the banner.
	apiURL, _, serveDone := startServe(t, ctx, "--policy", testPolicy(t), "--addr", "127.0.0.1:0", "--max-tokens", "8")
	serveAddr := strings.TrimSuffix(strings.TrimPrefix(apiURL, "http://"), "/v1")
	runAddr, promAddr := freeAddr(t), freeAddr(t)

	// Scraped every 200 ms: the loop's run lasts a few seconds, and a
	// rate() of its series needs two samples of them while it is up.
	cfg := fmt.Sprintf(`global: {scrape_interval: 200ms, scrape_timeout: 180ms}
scrape_configs:
  - job_name: serve
    static_configs: [{targets: [%q]}]
  - job_name: run
    static_configs: [{targets: [%q]}]
`, serveAddr, runAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var promLog syncBuffer
	prom := exec.CommandContext(ctx, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); prom.Wait() }()
	base := "http://" + promAddr
	waitFor(t, 60*time.Second, "prometheus ready: "+promLog.String(), func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})

	// Three chat calls to serve.
	for range 3 {
		resp, err := http.Post(apiURL+"/chat/completions", "application/json",
			strings.NewReader(`{"model": "any", "messages": [{"role": "user", "content": "hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("chat: status %d", resp.StatusCode)
		}
	}

	// The loop, serving its metrics while it runs. Scraped every 200 ms,
	// Prometheus sees its counters grow; the last second before the exit
	// may be missed, so the loop's checks are lower bounds and the gauges'.
	self, _ := os.Executable()
	code, _, stderr := runCLI(t, testEnv(nil), "run", "--config", loopTestConfig(t, dir), "--agent", self, "--metrics-addr", runAddr)
	if code != 0 {
		t.Fatalf("legorl run: exit %d: %s", code, stderr)
	}

	// Serve's counters are final: wait for a scrape after the calls.
	waitFor(t, 30*time.Second, "serve's 3 calls scraped", func() bool {
		return promQuery(t, base, `sum(legorl_proxy_requests_total{job="serve",api="chat",outcome="ok"})`)[""] == 3
	})
	completion := promQuery(t, base, `sum(legorl_proxy_completion_tokens_total{job="serve"})`)[""]
	generated := promQuery(t, base, `sum(legorl_engine_generated_tokens_total{job="serve"})`)[""]
	if completion < 3 || completion > 24 || completion != generated {
		t.Errorf("serve: %v completion tokens by the proxy, %v generated by the engine; want equal, 3 to 24", completion, generated)
	}
	if v := promQuery(t, base, `sum(legorl_proxy_request_duration_seconds_count{job="serve"})`)[""]; v != 3 {
		t.Errorf("serve: %v calls timed, want 3", v)
	}
	if v := promQuery(t, base, `up{job="serve"}`)["job=serve"]; v != 1 {
		t.Errorf("up{job=serve} = %v", v)
	}

	// The loop: rollouts launched and ended, with the gate above 0.99.
	launched := promQuery(t, base, `max_over_time(legorl_pipeline_rollouts_launched_total{job="run"}[10m])`)
	ended := promQuery(t, base, `max_over_time(sum(legorl_pipeline_rollouts_ended_total{job="run"})[10m:1s])`)[""]
	if v := launched["job=run"]; v < 4 || ended < 4 || ended > v {
		t.Errorf("run: %v rollouts launched, %v ended seen; want at least one iteration's 4, ended <= launched", v, ended)
	}
	if v := promQuery(t, base, `max_over_time(legorl_trainer_gate_pearson{job="run"}[10m])`)["job=run"]; !(v >= 0.99) {
		t.Errorf("run: gate Pearson %v, want >= 0.99", v)
	}
	if v := promQuery(t, base, `max_over_time(legorl_engine_generated_tokens_total{job="run"}[10m])`)["job=run"]; !(v > 0) {
		t.Errorf("run: engine generated %v tokens", v)
	}

	// Every query of the Grafana dashboard evaluates; those of series both
	// jobs export return data.
	b, err := os.ReadFile("../../monitor/grafana/legorl.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil || len(dash.Panels) == 0 {
		t.Fatalf("monitor/grafana/legorl.json: %v, %d panels", err, len(dash.Panels))
	}
	documented, _ := os.ReadFile("../../docs/METRICS.md")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range regexpMetric.FindAllString(tg.Expr, -1) {
				name = strings.TrimSuffix(name, "_bucket")
				if !strings.Contains(string(documented), "`"+name+"`") {
					t.Errorf("panel %q: %s is not in docs/METRICS.md", p.Title, name)
				}
			}
			// Over the last 10 minutes, so the loop's series (gone since
			// its exit) count too.
			q := strings.ReplaceAll(tg.Expr, "[5m]", "[10m]")
			q = strings.ReplaceAll(q, "[1m]", "[10m]")
			if !strings.Contains(q, "[10m]") {
				q = "max_over_time((" + q + ")[10m:1s])"
			}
			// No rollout of the loop is masked and forks are rare: those
			// series may not exist.
			if res := promQuery(t, base, q); len(res) == 0 && !strings.Contains(tg.Expr, "masked") && !strings.Contains(tg.Expr, "forks") {
				t.Errorf("panel %q: %s returned no data", p.Title, tg.Expr)
			}
		}
	}
	cancel()
	<-serveDone
}
