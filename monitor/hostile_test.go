package monitor

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
)

// Hostile agent text: what a policy, a harness or a task can put into the
// tables the dashboard draws (tool arguments and names, file and test
// names, errors, ids).
var hostile = []string{
	`<script>alert("x")</script>`,
	`"><img src=x onerror=alert(1)>`,
	`' onmouseover='alert(1)`,
	`<svg onload=alert(1)><circle/></svg>`,
	`</title><script>alert(1)</script>`,
	`javascript:alert(1)`,
	`</textarea></style><iframe src=//evil>`,
}

// TestHostileText: a run whose rows carry hostile text in every string the
// pages show (task and rollout ids, harness, error, flags, test ids,
// tool names and arguments, finish reasons) renders as text on every
// page and panel: no script but the page's own, no event handler, no
// element or URL the text opened.
func TestHostileText(t *testing.T) {
	const run = "hostile"
	its := fixtureRunHostile(run)
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range its {
		writeIteration(t, st, run, i, it)
	}
	m, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	badID := its[0].Rollouts[0].RolloutID
	paths := []string{"/", "/runs/" + run, "/runs/" + run + "?iter=0&task=" + url.QueryEscape(hostile[0]),
		"/runs/" + run + "/rollouts/" + url.PathEscape(badID), "/runs/" + url.PathEscape(hostile[1])}
	for _, p := range PanelIDs() {
		paths = append(paths, "/runs/"+run+"/panels/"+p, "/runs/"+run+"/panels/"+p+"?iter=1&task="+url.QueryEscape(hostile[3]))
	}
	shown := map[string]bool{}
	for _, p := range paths {
		code, body := get(t, srv, p)
		if code >= 500 {
			t.Errorf("%s: %d: %s", p, code, body)
			continue
		}
		checkInert(t, p, body, shown)
	}
	// The text is shown, as text: each payload appears decoded in some
	// page's text or attribute values.
	for _, h := range hostile {
		if !shown[h] {
			t.Errorf("payload %q never shown as text", h)
		}
	}
}

// checkInert parses body as HTML and fails on anything hostile text could
// have opened; it records which payloads appear as text or attribute value.
func checkInert(t *testing.T, path, body string, shown map[string]bool) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(body))
	scripts := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		switch tt {
		case html.TextToken:
			for _, h := range hostile {
				if strings.Contains(tok.Data, h) {
					shown[h] = true
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			switch tok.Data {
			case "script":
				scripts++
				if len(tok.Attr) == 0 || tok.Attr[0].Key != "src" || tok.Attr[0].Val != "/static/app.js" {
					t.Errorf("%s: a script element: %v", path, tok)
				}
			case "img", "iframe", "object", "embed", "textarea", "style", "form", "base":
				t.Errorf("%s: an element the page does not draw: %v", path, tok)
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(a.Key, "on") {
					t.Errorf("%s: an event handler: %v", path, tok)
				}
				if (a.Key == "href" || a.Key == "src") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:") {
					t.Errorf("%s: a javascript URL: %v", path, tok)
				}
				if a.Key == "style" && strings.ContainsAny(a.Val, `<>"'`) {
					t.Errorf("%s: a style the page does not write: %v", path, tok)
				}
				for _, h := range hostile {
					if strings.Contains(a.Val, h) {
						shown[h] = true
					}
				}
			}
		}
	}
	if scripts > 1 {
		t.Errorf("%s: %d script elements", path, scripts)
	}
}

// fixtureRunHostile is a 2-iteration run whose strings carry the hostile
// payloads.
func fixtureRunHostile(run string) []synth.Iteration {
	its := synth.Run(fixtureConfig(run, 2))
	pick := func(i int) string { return hostile[i%len(hostile)] }
	for n := range its {
		it := &its[n]
		ids := map[string]string{}
		for i := range it.Rollouts {
			r := &it.Rollouts[i]
			if i == 0 {
				ids[r.RolloutID] = r.RolloutID + pick(4)
				r.RolloutID = ids[r.RolloutID]
			}
			r.TaskID = r.TaskID + pick(i)
			r.Harness = pick(i + n)
			r.Flags = append(r.Flags, pick(i+1))
			r.F2PFailed = append(r.F2PFailed, "tests/"+pick(i+2)+".py::test_x")
			if r.Status == schemas.StatusMasked || i%3 == 0 {
				r.Error = pick(i + 3)
			}
		}
		for i := range it.Segments {
			if id, ok := ids[it.Segments[i].RolloutID]; ok {
				it.Segments[i].RolloutID = id
			}
			it.Segments[i].FinishReason = pick(i + 5)
		}
		for i := range it.Steps {
			s := &it.Steps[i]
			if id, ok := ids[s.RolloutID]; ok {
				s.RolloutID = id
			}
			s.ToolName = pick(i)
			s.Arguments = `{"path": "` + strings.ReplaceAll(pick(i+1), `"`, `\"`) + `", "cmd": "cat ` + strings.ReplaceAll(pick(i+3), `"`, `\"`) + `"}`
		}
	}
	return its
}
