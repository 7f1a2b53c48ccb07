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
}).ParseFS(assets, "assets/page.html"))

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
	Panels    []template.HTML
	PanelNav  []panelDef
	Iter      int
	Body      template.HTML
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
		d.Page, d.Body = "error", template.HTML(esc(err.Error()))
		m.page(w, r, http.StatusNotFound, d)
		return
	}
	s, err := m.snapshot(r.Context(), run)
	if err != nil {
		d.Error = err.Error()
	}
	if s == nil {
		d.Page, d.Body = "error", template.HTML(esc("the store could not be read; this page does not refresh by itself: reload it later"))
		m.page(w, r, http.StatusOK, d)
		return
	}
	d.Version = s.Version
	if len(s.Manifests) == 0 && len(s.Problems) == 0 {
		d.Empty = true
		d.Error = fmt.Sprintf("run %s has no committed manifest yet in %s: no data. This page refreshes when the first one is committed.", run, m.st.URI())
	}
	for _, p := range panels {
		d.Panels = append(d.Panels, m.panelHTML(r, s, p))
	}
	m.page(w, r, http.StatusOK, d)
}

// panelHTML draws one panel as a <section>: title, status, problems and
// the panel's body. A panel that fails draws its failure, never the page's.
func (m *Monitor) panelHTML(r *http.Request, s *snapshot, p panelDef) template.HTML {
	v := &view{ctx: r.Context(), m: m, s: s, q: r.URL.Query()}
	res := m.panel(r.Context(), s, p, r.URL.Query())
	var body template.HTML
	if res.Data != nil {
		func() {
			defer func() {
				if x := recover(); x != nil {
					res.Status = "missing"
					res.Problems = append(res.Problems, Problem{Reason: fmt.Sprintf("monitor: drawing panel %s failed: %v", p.ID, x)})
					body = ""
				}
			}()
			body = p.HTML(v, res.Data)
		}()
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<section class="panel st-%s" id="panel-%s" data-panel="%s" data-status="%s" data-version="%d">`, res.Status, p.ID, p.ID, res.Status, res.Version)
	fmt.Fprintf(&b, `<h2>%s <span class="badge %s" data-k="status">%s</span></h2><p class="help">%s</p>`, esc(p.Title), res.Status, res.Status, esc(p.Help))
	if len(res.Problems) > 0 {
		b.WriteString(`<ul class="problems">`)
		for _, pr := range res.Problems {
			b.WriteString(`<li data-k="problem"`)
			if pr.Table != "" {
				fmt.Fprintf(&b, ` data-table="%s"`, esc(pr.Table))
			}
			b.WriteString(">")
			if pr.Table != "" {
				fmt.Fprintf(&b, "<b>%s</b>: ", esc(pr.Table))
			}
			if pr.Key != "" {
				fmt.Fprintf(&b, "<code>%s</code>: ", esc(pr.Key))
			}
			b.WriteString(esc(pr.Reason) + "</li>")
		}
		b.WriteString(`</ul>`)
	}
	if res.Status == "missing" {
		b.WriteString(`<p class="missing" data-k="missing">Nothing to show: the data this panel needs is missing (see above).</p>`)
	}
	b.WriteString(string(body))
	b.WriteString(`</section>`)
	return template.HTML(b.String())
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
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, m.panelHTML(r, s, p))
}

func (m *Monitor) serveTrajectory(w http.ResponseWriter, r *http.Request) {
	run, id := r.PathValue("run"), r.PathValue("id")
	d := pageData{Title: id + " · legorl monitor", Page: "trajectory", Run: run}
	tr, err := m.Trajectory(r.Context(), run, id)
	if err != nil {
		d.Page, d.Body = "error", template.HTML(esc(err.Error()))
		code := http.StatusOK
		if errors.Is(err, ErrRun) || errors.Is(err, ErrRollout) {
			code = http.StatusNotFound
		}
		m.page(w, r, code, d)
		return
	}
	d.Iter = int(tr.Rollout.Iteration)
	d.Body = trajectoryHTML(tr)
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

func trajectoryHTML(tr *Trajectory) template.HTML {
	r := tr.Rollout
	var b strings.Builder
	fmt.Fprintf(&b, `<h1>rollout <span data-k="rollout_id">%s</span></h1>`, esc(r.RolloutID))
	if len(tr.Problems) > 0 {
		b.WriteString(`<ul class="problems">`)
		for _, p := range tr.Problems {
			fmt.Fprintf(&b, `<li data-k="problem">%s</li>`, esc(p.String()))
		}
		b.WriteString(`</ul>`)
	}
	kv := func(k, label, v string) {
		fmt.Fprintf(&b, `<dt>%s</dt><dd data-k="%s">%s</dd>`, esc(label), k, esc(v))
	}
	b.WriteString(`<dl class="kv" id="rollout">`)
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
	b.WriteString(`</dl>`)

	b.WriteString(`<section id="segments"><h2>Segments</h2><p class="help">Grey: prompt; blue: sampled tokens (loss mask 1); amber: tokens the harness added (observations, template). A fork is a segment whose prompt rewrote the previous segment's history.</p>`)
	b.WriteString(string(tokenMap(tr.Segments)))
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
		t.raw("</tr>")
	}
	b.WriteString(t.end() + `</section>`)

	b.WriteString(`<section id="steps"><h2>Steps</h2><p class="help">One row per turn: the tool call, its arguments, the observation's size and exit code. Message text is not stored; token ids are in the segments.</p>`)
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
		st.raw("</tr>")
	}
	if len(tr.Steps) == 0 {
		st.raw(`<tr><td colspan="8" class="miss">no steps recorded for this rollout</td></tr>`)
	}
	b.WriteString(st.end() + `</section>`)
	return template.HTML(b.String())
}

func list(s []string) string {
	if len(s) == 0 {
		return "–"
	}
	return strings.Join(s, ", ")
}

// tokenMap draws each segment as a bar: prompt, then the completion's runs
// of sampled and added tokens, all on one token scale.
func tokenMap(segs []TrajSegment) template.HTML {
	if len(segs) == 0 {
		return ""
	}
	most := 1
	for _, s := range segs {
		most = max(most, s.PromptTokens+s.CompletionTokens)
	}
	const w, rowH, left = 900.0, 18.0, 70.0
	h := rowH*float64(len(segs)) + 6
	scale := (w - left - 10) / float64(most)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart tokmap" viewBox="0 0 %.0f %.0f" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="token map" style="max-width:none">`, w, h)
	for i, s := range segs {
		y := 3 + float64(i)*rowH
		fmt.Fprintf(&b, `<text class="tick" x="4" y="%.1f">segment %d</text>`, y+11, s.Index)
		x := left
		fmt.Fprintf(&b, `<rect class="tok-p" x="%.1f" y="%.1f" width="%.2f" height="%.0f"><title>prompt: %d tokens</title></rect>`, x, y, float64(s.PromptTokens)*scale, rowH-4, s.PromptTokens)
		x += float64(s.PromptTokens) * scale
		for _, r := range s.Runs {
			cls, what := "tok-o", "added by the harness"
			if r.Sampled {
				cls, what = "tok-s", "sampled"
			}
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.2f" height="%.0f"><title>%s: %d tokens</title></rect>`, cls, x, y, float64(r.N)*scale, rowH-4, what, r.N)
			x += float64(r.N) * scale
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
