package proxy

import (
	"encoding/json"
	"net/http"
	"time"
)

// modelObject describes the served model in the union of OpenAI's and
// Anthropic's shapes (each client ignores the other's fields), so that one
// /v1/models route serves both SDKs.
type modelObject struct {
	ID          string `json:"id"`
	Object      string `json:"object"`       // OpenAI: "model"
	Created     int64  `json:"created"`      // OpenAI: Unix seconds
	OwnedBy     string `json:"owned_by"`     // OpenAI
	Type        string `json:"type"`         // Anthropic: "model"
	DisplayName string `json:"display_name"` // Anthropic
	CreatedAt   string `json:"created_at"`   // Anthropic: RFC 3339
}

type modelList struct {
	Object  string        `json:"object"` // OpenAI: "list"
	Data    []modelObject `json:"data"`
	HasMore bool          `json:"has_more"` // Anthropic
	FirstID string        `json:"first_id"` // Anthropic
	LastID  string        `json:"last_id"`  // Anthropic
}

// serveModels lists the served model, or describes it
// (/models/{model}); the rollout must be open.
func (p *Proxy) serveModels(w http.ResponseWriter, r *http.Request, f wireFormat, id string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		f.fail(w, methodNotAllowed(r.Method))
		return
	}
	p.mu.Lock()
	_, ok := p.rollouts[id]
	p.mu.Unlock()
	if !ok {
		f.fail(w, unknownRollout(id))
		return
	}
	now := p.opt.Clock()
	m := modelObject{ID: p.opt.ModelName, Object: "model", Created: now.Unix(), OwnedBy: "legorl",
		Type: "model", DisplayName: p.opt.ModelName, CreatedAt: now.UTC().Format(time.RFC3339)}
	var body any = modelList{Object: "list", Data: []modelObject{m}, FirstID: m.ID, LastID: m.ID}
	if name := r.PathValue("model"); name != "" {
		if name != p.opt.ModelName && !p.accepts(name) {
			f.fail(w, unknownModel(name))
			return
		}
		m.ID, m.DisplayName = name, name
		body = m
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(body); err != nil {
		p.opt.Logger.Warn("proxy: write models", "err", err)
	}
}
