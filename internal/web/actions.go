package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
)

// Operator performs an operator action on a config's rollout
// (rollout.Controller.Act, with the actions' defaults: a rollback with no
// version goes to the rollout's previous version); the rollout controller
// audits it. It returns errors wrapping rollout.ErrUnknownVerb,
// rollout.ErrNoRollout, rollout.ErrState, rollout.ErrNoReason,
// rollout.ErrNotPinned or cuecast.ErrNotFound for requests that cannot
// apply, anything else for failures. On success it returns the config's
// record as the action left it, which is what the action's log record
// names (the dashboard's sample may be older than the action).
type Operator interface {
	Act(ctx context.Context, a rollout.Action) (rollout.Record, error)
}

var _ Operator = (*rollout.Controller)(nil)

// ControllerOperator performs the actions with the rollout controller.
func ControllerOperator(c *rollout.Controller) Operator { return c }

func (s *Server) actionsEnabled() bool { return s.o.OperatorToken != "" && s.o.Operator != nil }

// actionRequest is the body of POST /api/rollouts/{action}/{config}.
type actionRequest struct {
	Reason    string `json:"reason"`
	Actor     string `json:"actor"`
	Emergency bool   `json:"emergency"`
	// Version is where a rollback goes; 0: the rollout's previous version.
	Version uint64 `json:"version"`
}

// action performs an operator action. It answers 401 (and does nothing)
// unless the server has an operator token and the request carries it as a
// bearer token; 400 for an unknown action or a missing reason; 404 without a
// rollout; 409 when the rollout's state does not allow the action; 204 when
// it was done.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	act := r.PathValue("action")
	if !s.authorized(r) {
		s.log.Warn("operator action refused: no or wrong bearer token", "action", act, "config", r.PathValue("path"),
			"remote", r.RemoteAddr, "enabled", s.actionsEnabled())
		w.Header().Set("WWW-Authenticate", `Bearer realm="cuecast operator"`)
		msg := "operator actions need the operator token as a bearer token"
		if !s.actionsEnabled() {
			msg = "operator actions are disabled: start serve with --operator-token (or CUECAST_OPERATOR_TOKEN)"
		}
		writeError(w, http.StatusUnauthorized, msg)
		return
	}
	if !s.actionsEnabled() {
		writeError(w, http.StatusUnauthorized, "operator actions are disabled")
		return
	}
	cfg, err := configParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	verb, err := rollout.ParseVerb(act)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req actionRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	actor := strings.TrimSpace(req.Actor)
	if actor == "" {
		actor = "operator"
	}
	a := rollout.Action{Verb: verb, Config: cfg, Version: req.Version, Actor: "web:" + actor, Reason: strings.TrimSpace(req.Reason), Emergency: req.Emergency}
	log := s.log.With("action", act, "config", cfg, "actor", a.Actor, "remote", r.RemoteAddr, "emergency", a.Emergency)
	rec, err := s.o.Operator.Act(r.Context(), a)
	switch {
	case err == nil:
		// The rollout is the one the action itself returned: the dashboard's
		// cached sample may predate the rollout or lack it (TestStructuredLogs
		// failed on a busy machine when it did).
		if rec.Current != nil {
			log = log.With("rollout", rec.Current.ID, "version", rec.Current.Version)
		}
		log.Info("operator action done", "reason", a.Reason)
		w.WriteHeader(http.StatusNoContent)
		// Show the result without waiting for the next tick.
		select {
		case s.poke <- struct{}{}:
		default:
		}
		return
	case errors.Is(err, rollout.ErrNoReason), errors.Is(err, rollout.ErrUnknownVerb):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, rollout.ErrNoRollout), errors.Is(err, cuecast.ErrNotFound), errors.Is(err, cuecast.ErrPurged):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, rollout.ErrState), errors.Is(err, rollout.ErrNotPinned):
		writeError(w, http.StatusConflict, err.Error())
	default:
		log.Error("operator action failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	log.Warn("operator action refused", "err", err)
}
