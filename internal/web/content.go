package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
)

// VersionReader reads a version's compiled content. The distributor is one;
// a Fleet that is one gives the dashboard each version's content and its
// diff against the version before it.
type VersionReader interface {
	Version(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (cuecast.Version, []byte, error)
}

// contentView is one version's compiled content and what changed since the
// retained version before it.
type contentView struct {
	Config   cuecast.ConfigPath `json:"config"`
	Version  uint64             `json:"version"`
	Checksum string             `json:"checksum"`
	Commit   string             `json:"commit"`
	Deleted  bool               `json:"deleted,omitempty"`
	// Content is the compiled JSON, indented for reading.
	Content string `json:"content"`
	// Previous is the retained version before Version (0: none); Diff is
	// what changed from it, path by path, as `cuecast check` shows it.
	Previous uint64          `json:"previous,omitempty"`
	Diff     []ci.Difference `json:"diff"`
	// Flags describes a flag set version's flags (docs/FLAGS.md); absent
	// for any other config.
	Flags []flagView `json:"flags,omitempty"`
}

// apiVersion serves GET /api/versions/<config>?version=N.
func (s *Server) apiVersion(w http.ResponseWriter, r *http.Request) {
	cfg, err := configParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	n, err := strconv.ParseUint(r.URL.Query().Get("version"), 10, 64)
	if err != nil || n == 0 {
		writeError(w, http.StatusBadRequest, "version: want ?version=N, a version number")
		return
	}
	vr, ok := s.o.Fleet.(VersionReader)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this server cannot read version content")
		return
	}
	cv, err := s.contentOf(r.Context(), vr, cfg, n)
	switch {
	case errors.Is(err, cuecast.ErrNotFound) || errors.Is(err, cuecast.ErrPurged):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, cv)
	}
}

func (s *Server) contentOf(ctx context.Context, vr VersionReader, cfg cuecast.ConfigPath, n uint64) (contentView, error) {
	v, body, err := vr.Version(ctx, cfg, n)
	if err != nil {
		return contentView{}, err
	}
	cv := contentView{Config: cfg, Version: v.Version, Checksum: v.Checksum, Commit: v.Commit, Deleted: v.Deleted,
		Content: indent(body), Diff: []ci.Difference{}, Flags: flagViews(body)}
	vl, err := s.versions(ctx, cfg, n)
	if err != nil {
		return contentView{}, err
	}
	for _, pv := range vl.versions { // newest first
		if pv.Version < n {
			cv.Previous = pv.Version
			break
		}
	}
	if cv.Previous == 0 {
		return cv, nil
	}
	_, prev, err := vr.Version(ctx, cfg, cv.Previous)
	if err != nil {
		return contentView{}, fmt.Errorf("read v%d to compare: %w", cv.Previous, err)
	}
	if len(prev) == 0 || len(body) == 0 {
		return cv, nil // a tombstone on either side: the content says it all
	}
	if cv.Diff, err = ci.Diff(prev, body); err != nil {
		return contentView{}, fmt.Errorf("compare v%d with v%d: %w", cv.Previous, n, err)
	}
	if cv.Diff == nil {
		cv.Diff = []ci.Difference{}
	}
	return cv, nil
}

func indent(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}
