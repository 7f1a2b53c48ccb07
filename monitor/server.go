package monitor

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

var pageTmpl = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"num": func(n Num, prec int) string { return fmtNum(n, prec) },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
}).ParseFS(assets, "assets/page.html", "assets/panels.html"))

// Handler returns the dashboard's HTTP handler.
//
// Pages: / (the runs overview), /runs/RUN (the panels of a run),
// /runs/RUN/panels/PANEL (one panel's HTML, which the page fetches to
// redraw), /runs/RUN/rollouts/ID (the trajectory viewer).
//
// JSON: /api/runs (the runs overview), /api/runs/RUN/status (the version
// the page polls), /api/runs/RUN/panels/PANEL (one panel's data: see
// PanelResult and PanelIDs), /api/runs/RUN/rollouts/ID (a Trajectory).
func (m *Monitor) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", m.serveIndex)
	mux.HandleFunc("GET /runs/{run}", m.serveRun)
	mux.HandleFunc("GET /runs/{run}/panels/{panel}", m.servePanelHTML)
	mux.HandleFunc("GET /runs/{run}/rollouts/{id}", m.serveTrajectory)
	mux.HandleFunc("GET /api/runs", m.apiRuns)
	mux.HandleFunc("GET /api/runs/{run}/status", m.apiStatus)
	mux.HandleFunc("GET /api/runs/{run}/panels/{panel}", m.apiPanel)
	mux.HandleFunc("GET /api/runs/{run}/rollouts/{id}", m.apiTrajectory)
	return recoverer(mux)
}

// recoverer turns a panic in a handler into a one-line 500 for that
// request only; the server keeps serving.
func recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				http.Error(w, fmt.Sprintf("monitor: internal error: %v", v), http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

type pageData struct {
	Title     string
	Store     string
	Page      string
	Run       string
	Version   int
	RefreshMS int64
	Runs      []RunSummary // the navigation
	Summaries []RunSummary // the index
	Panels    []panelView
	PanelNav  []panelDef
	Iter      int
	Traj      *trajView
	Message   string // the error page's text
	Error     string
	Empty     bool // the run has no manifest yet: the page reloads whole when one comes
}

func (m *Monitor) page(w http.ResponseWriter, r *http.Request, code int, d pageData) {
	d.Store = m.st.URI()
	d.RefreshMS = m.opts.Refresh.Milliseconds()
	if d.Runs == nil && m.opts.Run == "" {
		d.Runs, _ = m.navRuns(r)
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, d); err != nil {
		http.Error(w, "monitor: render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// navRuns lists the run ids for the navigation bar, without reading them.
func (m *Monitor) navRuns(r *http.Request) ([]RunSummary, error) {
	ids, err := m.discover(r.Context())
	out := make([]RunSummary, len(ids))
	for i, id := range ids {
		out[i] = RunSummary{RunID: id}
	}
	return out, err
}

func (m *Monitor) serveIndex(w http.ResponseWriter, r *http.Request) {
	if m.opts.Run != "" {
		http.Redirect(w, r, "/runs/"+url.PathEscape(m.opts.Run), http.StatusFound)
		return
	}
	d := pageData{Title: "legorl monitor", Page: "index"}
	runs, err := m.Runs(r.Context())
	if err != nil {
		d.Error = err.Error()
	}
	d.Summaries = runs
	d.Runs = runs
	if d.Runs == nil {
		d.Runs = []RunSummary{}
	}
	m.page(w, r, http.StatusOK, d)
}

func (m *Monitor) serveRun(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("run")
	d := pageData{Title: run + " · legorl monitor", Page: "run", Run: run, PanelNav: panels}
	if err := m.checkRun(run); err != nil {
		d.Page, d.Message = "error", err.Error()
		m.page(w, r, http.StatusNotFound, d)
		return
	}
	s, err := m.snapshot(r.Context(), run)
	if err != nil {
		d.Error = err.Error()
	}
	if s == nil {
		d.Page, d.Message = "error", "the store could not be read; this page does not refresh by itself: reload it later"
		m.page(w, r, http.StatusOK, d)
		return
	}
	d.Version = s.Version
	if len(s.Manifests) == 0 && len(s.Problems) == 0 {
		d.Empty = true
		d.Error = fmt.Sprintf("run %s has no committed manifest yet in %s: no data. This page refreshes when the first one is committed.", run, m.st.URI())
	}
	for _, p := range panels {
		d.Panels = append(d.Panels, m.panelView(r, s, p))
	}
	m.page(w, r, http.StatusOK, d)
}

// panelView lays out one panel's <section>: title, status, problems and
// the panel's body. A panel that fails draws its failure, never the page's.
func (m *Monitor) panelView(r *http.Request, s *snapshot, p panelDef) panelView {
	v := &view{ctx: r.Context(), m: m, s: s, q: r.URL.Query()}
	res := m.panel(r.Context(), s, p, r.URL.Query())
	var body frag
	if res.Data != nil {
		func() {
			defer func() {
				if x := recover(); x != nil {
					res.Status = "missing"
					res.Problems = append(res.Problems, Problem{Reason: fmt.Sprintf("monitor: drawing panel %s failed: %v", p.ID, x)})
					body = nil
				}
			}()
			body = p.HTML(v, res.Data)
		}()
	}
	return panelView{ID: p.ID, Title: p.Title, Help: p.Help, Status: res.Status, Version: res.Version,
		Problems: res.Problems, Missing: res.Status == "missing", Body: body}
}

func (m *Monitor) servePanelHTML(w http.ResponseWriter, r *http.Request) {
	run, id := r.PathValue("run"), r.PathValue("panel")
	p, ok := panelByID(id)
	if !ok {
		http.Error(w, fmt.Sprintf("%v: %q", ErrPanel, id), http.StatusNotFound)
		return
	}
	if err := m.checkRun(run); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s, err := m.snapshot(r.Context(), run)
	if s == nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, "panel", m.panelView(r, s, p)); err != nil {
		http.Error(w, "monitor: render panel: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

func (m *Monitor) serveTrajectory(w http.ResponseWriter, r *http.Request) {
	run, id := r.PathValue("run"), r.PathValue("id")
	d := pageData{Title: id + " · legorl monitor", Page: "trajectory", Run: run}
	tr, err := m.Trajectory(r.Context(), run, id)
	if err != nil {
		d.Page, d.Message = "error", err.Error()
		code := http.StatusOK
		if errors.Is(err, ErrRun) || errors.Is(err, ErrRollout) {
			code = http.StatusNotFound
		}
		m.page(w, r, code, d)
		return
	}
	d.Iter = int(tr.Rollout.Iteration)
	d.Traj = trajectoryView(tr)
	m.page(w, r, http.StatusOK, d)
}

// ---- JSON ----

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "monitor: encode: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusServiceUnavailable
	if errors.Is(err, ErrRun) || errors.Is(err, ErrPanel) || errors.Is(err, ErrRollout) {
		code = http.StatusNotFound
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func (m *Monitor) apiRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := m.Runs(r.Context())
	if err != nil && runs == nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

func (m *Monitor) apiStatus(w http.ResponseWriter, r *http.Request) {
	st, err := m.Status(r.Context(), r.PathValue("run"))
	if err != nil && st.RunID == "" {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (m *Monitor) apiPanel(w http.ResponseWriter, r *http.Request) {
	res, err := m.Panel(r.Context(), r.PathValue("run"), r.PathValue("panel"), r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (m *Monitor) apiTrajectory(w http.ResponseWriter, r *http.Request) {
	tr, err := m.Trajectory(r.Context(), r.PathValue("run"), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tr)
}

// ---- the trajectory page ----

func trajectoryView(tr *Trajectory) *trajView {
	r := tr.Rollout
	out := &trajView{RolloutID: r.RolloutID}
	for _, p := range tr.Problems {
		out.Problems = append(out.Problems, p.String())
	}
	kv := func(k, label, v string) { out.KV = append(out.KV, trajKV{k, label, v}) }
	kv("task_id", "task", r.TaskID)
	kv("iteration", "iteration", itoa(int(r.Iteration)))
	kv("harness", "harness", r.Harness)
	kv("policy_version", "policy version", strconv.FormatInt(r.PolicyVersion, 10))
	kv("status", "status", string(r.Status))
	kv("termination", "termination", string(r.Termination))
	kv("reward", "reward", strconv.FormatFloat(r.Reward, 'g', 4, 64))
	kv("f2p_passed", "FAIL_TO_PASS passed", list(r.F2PPassed))
	kv("f2p_failed", "FAIL_TO_PASS failed", list(r.F2PFailed))
	kv("p2p_passed", "PASS_TO_PASS passed", list(r.P2PPassed))
	kv("p2p_failed", "PASS_TO_PASS failed", list(r.P2PFailed))
	kv("num_turns", "turns", itoa(int(r.NumTurns)))
	kv("num_llm_calls", "LLM calls", itoa(int(r.NumLLMCalls)))
	kv("num_tool_calls", "tool calls", itoa(int(r.NumToolCalls)))
	kv("tool_parse_failures", "tool-call parse failures", itoa(int(r.ToolParseFailures)))
	kv("diff_bytes", "diff bytes", strconv.FormatInt(r.DiffBytes, 10))
	kv("seconds", "seconds: setup / agent / llm / tools / grade", fmt.Sprintf("%.2f / %.2f / %.2f / %.2f / %.2f", r.SetupSeconds, r.AgentSeconds, r.LLMSeconds, r.ToolsSeconds, r.GradeSeconds))
	kv("flags", "flags", list(r.Flags))
	if r.Error != "" {
		kv("error", "error", r.Error)
	}
	kv("tokens", "tokens (all segments)", itoa(tr.Tokens))
	kv("sampled", "sampled tokens (loss mask 1)", itoa(tr.Sampled))
	kv("segments", "segments", itoa(len(tr.Segments)))
	kv("forks", "forks", itoa(tr.Forks))

	out.TokMap = tokenMap(tr.Segments)
	var t tb
	t.head("segment", "calls", "prompt", "completion", "sampled", "observation", "mean logprob", "policy", "finish", "sampling", "routing", "fork")
	for _, s := range tr.Segments {
		t.row("data-segment", itoa(s.Index))
		t.cell("segment_index", itoa(s.Index))
		t.cell("calls", fmt.Sprintf("%d–%d", s.FirstCall, s.LastCall))
		t.cell("prompt_tokens", itoa(s.PromptTokens))
		t.cell("completion_tokens", itoa(s.CompletionTokens))
		t.cell("sampled", itoa(s.Sampled))
		t.cell("observation", itoa(s.Observation))
		t.cell("mean_logprob", fmtNum(s.MeanLogprob, 4))
		t.cell("policy_version", strconv.FormatInt(s.PolicyVersion, 10))
		t.cell("finish_reason", s.FinishReason)
		t.cell("sampling", fmt.Sprintf("T=%g p=%g k=%d", s.Temperature, s.TopP, s.TopK))
		routing := "dense"
		if s.RoutingLayers > 0 {
			routing = fmt.Sprintf("%d layers × top-%d", s.RoutingLayers, s.RoutingTopK)
		}
		t.cell("routing", routing)
		fork := ""
		if s.Fork {
			fork = fmt.Sprintf("fork after %d shared tokens", s.SharedPrefix)
		} else if s.Index > 0 || s.SharedPrefix > 0 {
			fork = "continues"
		}
		t.cell("fork", fork)
	}
	out.Segments = t.end()

	var st tb
	st.head("turn", "tool", "kind", "arguments", "observation bytes", "exit code", "parse failure", "seconds")
	for _, s := range tr.Steps {
		st.row("data-turn", itoa(int(s.Turn)))
		st.cell("turn", itoa(int(s.Turn)))
		st.cell("tool_name", s.ToolName)
		st.cell("kind", ToolKind(s.ToolName, s.Arguments))
		st.cell("arguments", s.Arguments, "class", "args", "title", s.Arguments)
		st.cell("observation_bytes", strconv.FormatInt(s.ObservationBytes, 10))
		st.cell("exit_code", itoa(int(s.ExitCode)))
		st.cell("parse_failure", strconv.FormatBool(s.ParseFailure))
		st.cell("seconds", strconv.FormatFloat(s.Seconds, 'f', 2, 64))
	}
	if len(tr.Steps) == 0 {
		st.row()
		st.add(tcell{Colspan: 8, Class: "miss", Text: "no steps recorded for this rollout"})
	}
	out.Steps = st.end()
	return out
}

func list(s []string) string {
	if len(s) == 0 {
		return "–"
	}
	return strings.Join(s, ", ")
}

// tokenMap draws each segment as a bar: prompt, then the completion's runs
// of sampled and added tokens, all on one token scale.
func tokenMap(segs []TrajSegment) *chart {
	if len(segs) == 0 {
		return nil
	}
	most := 1
	for _, s := range segs {
		most = max(most, s.PromptTokens+s.CompletionTokens)
	}
	const w, rowH, left = 900.0, 18.0, 70.0
	h := rowH*float64(len(segs)) + 6
	scale := (w - left - 10) / float64(most)
	f0 := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	c := &chart{Class: "chart tokmap", W: f0(w), H: f0(h), Label: "token map", Wide: true}
	for i, s := range segs {
		y := 3 + float64(i)*rowH
		c.Marks = append(c.Marks, mark{Tag: "text", Class: "tick", X: "4", Y: f1(y + 11), Text: fmt.Sprintf("segment %d", s.Index)})
		x := left
		c.Marks = append(c.Marks, mark{Tag: "rect", Class: "tok-p", X: f1(x), Y: f1(y), W: f2(float64(s.PromptTokens) * scale), H: f0(rowH - 4),
			Title: fmt.Sprintf("prompt: %d tokens", s.PromptTokens)})
		x += float64(s.PromptTokens) * scale
		for _, r := range s.Runs {
			cls, what := "tok-o", "added by the harness"
			if r.Sampled {
				cls, what = "tok-s", "sampled"
			}
			c.Marks = append(c.Marks, mark{Tag: "rect", Class: cls, X: f1(x), Y: f1(y), W: f2(float64(r.N) * scale), H: f0(rowH - 4),
				Title: fmt.Sprintf("%s: %d tokens", what, r.N)})
			x += float64(r.N) * scale
		}
	}
	return c
}
