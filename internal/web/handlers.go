package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/cuecast/cuecast"
)

// page serves the dashboard's one HTML page; its script picks the view from
// the path (/ or /configs/<config>).
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, "read page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "+frameAncestors)
	w.Write(b)
}

// snapshotOrWait returns the current snapshot, waiting for the first one
// while the request lasts.
func (s *Server) snapshotOrWait(r *http.Request) (*snapshot, error) {
	for {
		snap, changed := s.current()
		if snap != nil {
			return snap, nil
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func configParam(r *http.Request) (cuecast.ConfigPath, error) {
	cfg := cuecast.ConfigPath(r.PathValue("path"))
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	return cfg, nil
}

func (s *Server) apiOverview(w http.ResponseWriter, r *http.Request) {
	snap, err := s.snapshotOrWait(r)
	if err != nil {
		return
	}
	writeJSON(w, http.StatusOK, s.overview(snap))
}

func (s *Server) apiConfig(w http.ResponseWriter, r *http.Request) {
	cfg, err := configParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	snap, err := s.snapshotOrWait(r)
	if err != nil {
		return
	}
	cv, err := s.configView(r.Context(), snap, cfg)
	switch {
	case errors.Is(err, errNoConfig):
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s: no such config", cfg))
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, cv)
	}
}

// apiChart serves a config's propagation chart as an SVG image.
func (s *Server) apiChart(w http.ResponseWriter, r *http.Request) {
	cfg, err := configParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, chartSVG(s.metrics.Propagation(cfg)))
}

// keepAlive is how often an idle event stream gets a comment, so proxies and
// browsers keep it open.
const keepAlive = 15 * time.Second

// events streams the view of a page as server-sent events: an "overview"
// event (no config parameter) or a "config" event (config=<path>) with the
// view's JSON, sent at once and again whenever a new sample changes it.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	var cfg cuecast.ConfigPath
	if c := r.URL.Query().Get("config"); c != "" {
		cfg = cuecast.ConfigPath(c)
		if err := cfg.Validate(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", 2000)
	fl.Flush()

	ctx := r.Context()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var last []byte
	var id int
	for {
		snap, changed := s.current()
		if snap != nil {
			event, v, err := s.eventView(r, snap, cfg)
			if err != nil {
				v = map[string]string{"error": err.Error()}
				event = "problem"
			}
			b, err := json.Marshal(v)
			if err != nil {
				return
			}
			if !bytes.Equal(b, last) {
				last = b
				id++
				if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, event, b); err != nil {
					return
				}
				fl.Flush()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
			if _, err := io.WriteString(w, ": keep-alive "+strconv.FormatInt(time.Now().Unix(), 10)+"\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

func (s *Server) eventView(r *http.Request, snap *snapshot, cfg cuecast.ConfigPath) (string, any, error) {
	if cfg == "" {
		return "overview", s.overview(snap), nil
	}
	cv, err := s.configView(r.Context(), snap, cfg)
	if errors.Is(err, errNoConfig) {
		return "", nil, fmt.Errorf("%s: no such config (yet)", cfg)
	}
	return "config", cv, err
}
