package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/poll"
)

// TestVersionContentAndDiff: the dashboard serves each version's compiled
// content and what changed from the version before it (issue 17: no
// compiled content or diff per version).
func TestVersionContentAndDiff(t *testing.T) {
	f := start(t, fixtureOptions{})
	f.setAmount("1234")
	type diff struct {
		Path string          `json:"path"`
		Op   string          `json:"op"`
		Old  json.RawMessage `json:"old"`
		New  json.RawMessage `json:"new"`
	}
	var got struct {
		Version  uint64 `json:"version"`
		Content  string `json:"content"`
		Previous uint64 `json:"previous"`
		Diff     []diff `json:"diff"`
	}
	poll.Until(t, "v2 of payments/checkout with its diff", poll.Patience, func() (bool, string) {
		code, body := get(t, f.base+"/api/versions/payments/checkout?version=2")
		if code != http.StatusOK {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		return true, ""
	})
	if got.Version != 2 || got.Previous != 1 || !strings.Contains(got.Content, `"max_amount_minor": 1234`) {
		t.Errorf("v2: version %d, previous %d, content %q; want 2, 1 and the new amount, indented", got.Version, got.Previous, got.Content)
	}
	if len(got.Diff) != 1 || got.Diff[0].Path != "max_amount_minor" || got.Diff[0].Op != "changed" ||
		string(got.Diff[0].Old) != "5000000" || string(got.Diff[0].New) != "1234" {
		t.Errorf("v2's diff: %+v; want max_amount_minor changed 5000000 ▶ 1234", got.Diff)
	}
	code, body := get(t, f.base+"/api/versions/payments/checkout?version=1")
	if code != http.StatusOK || !strings.Contains(body, `"diff":[]`) || strings.Contains(body, `"previous"`) {
		t.Errorf("v1: %d %s; want its content, no previous and an empty diff", code, body)
	}
	if code, body := get(t, f.base+"/api/versions/payments/checkout?version=99"); code != http.StatusNotFound {
		t.Errorf("v99: %d %s, want 404", code, body)
	}
	if code, body := get(t, f.base+"/api/versions/payments/checkout?version=x"); code != http.StatusBadRequest {
		t.Errorf("version=x: %d %s, want 400", code, body)
	}
}
