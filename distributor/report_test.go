package distributor_test

import (
	"errors"
	"testing"

	"github.com/cuecast/cuecast/distributor"
)

// TestDecodeReport: a report's instance and config are those of its
// subject; a body that names others is dropped with the reason the metric
// counts.
func TestDecodeReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, subject, body, reason string
	}{
		{"agrees", "ccs.payments.web-1.checkout", `{"instance":"web-1","config":"payments/checkout","healthy":true}`, ""},
		{"variant", "ccs.payments.web-1.checkout.env=prod", `{"instance":"web-1","config":"payments/checkout/env=prod"}`, ""},
		{"another instance", "ccs.payments.web-1.checkout", `{"instance":"web-2","config":"payments/checkout"}`, distributor.DropInstance},
		{"no instance", "ccs.payments.web-1.checkout", `{"config":"payments/checkout"}`, distributor.DropInstance},
		{"another namespace's config", "ccs.payments.web-1.x", `{"instance":"web-1","config":"search/ranking"}`, distributor.DropConfig},
		{"another config", "ccs.payments.web-1.checkout", `{"instance":"web-1","config":"payments/refunds"}`, distributor.DropConfig},
		{"not json", "ccs.payments.web-1.checkout", `not json`, distributor.DropMalformed},
		{"not a report subject", "ccs.payments.web-1", `{"instance":"web-1","config":"payments/checkout"}`, distributor.DropMalformed},
		{"invalid namespace", "ccs.Payments.web-1.checkout", `{"instance":"web-1","config":"Payments/checkout"}`, distributor.DropMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := distributor.DecodeReport(tc.subject, []byte(tc.body))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("DecodeReport(%s): %v", tc.subject, err)
				}
				if r.Instance != "web-1" {
					t.Errorf("instance %q, want web-1", r.Instance)
				}
				return
			}
			var re *distributor.ReportError
			if !errors.As(err, &re) || !errors.Is(err, distributor.ErrReportSubject) || re.Reason != tc.reason {
				t.Errorf("DecodeReport(%s, %s): %v, want a ReportError for %q", tc.subject, tc.body, err, tc.reason)
			}
		})
	}
}
