package natsconf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
)

// asyncErrs collects the asynchronous errors of a connection.
type asyncErrs chan error

func (a asyncErrs) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case a <- err:
		default:
		}
	})
}

// violation waits for the server's permissions violation naming subject.
func (a asyncErrs) violation(t *testing.T, what, subject string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-a:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
			t.Logf("%s: other async error: %v", what, err)
		case <-deadline:
			t.Fatalf("%s: no permissions violation for %s", what, subject)
		}
	}
}

func TestPermissionsIsolateNamespaces(t *testing.T) {
	for _, auth := range []string{"password", "creds"} {
		t.Run(auth, func(t *testing.T) {
			tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 1, Namespaces: []string{"payments", "search"}, JWT: auth == "creds"})
			testPermissions(t, tr)
		})
	}
}

func testPermissions(t *testing.T, tr *natstest.Tree) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := distributor.New(ctx, tr.Hub.Connect(t, natsconf.DistributorUser), distributor.Options{})
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	tr.Mirrors(t)
	publish(t, d, "search/ranking", 1, `{"boost":2}`)
	publish(t, d, checkout, 1, `{"v":1}`)

	for _, srv := range tr.Leaves {
		t.Run(srv.Spec.Name, func(t *testing.T) {
			errs := asyncErrs(make(chan error, 16))
			nc := srv.Connect(t, natsconf.ServiceUser("payments"), errs.option(), nats.PermissionErrOnSubscribe(true))

			// Its own namespace works: the mirror answers a direct get.
			own := "$JS.API.DIRECT.GET.CUECAST_payments.cc.payments.v.checkout"
			natstest.Eventually(t, 10*time.Second, "direct get of its own version", func() (bool, string) {
				m, err := nc.RequestWithContext(ctx, own, nil)
				if err != nil {
					return false, err.Error()
				}
				return m.Header.Get("Nats-Subject") == "cc.payments.v.checkout", fmt.Sprintf("status %s", m.Header.Get("Status"))
			})

			for _, tc := range []struct{ name, subject string }{
				{"subscribe to search's updates", "ccr.search.>"},
				{"subscribe to search's pointers", "ccr.search.p.7.ranking"},
				{"subscribe to another namespace's inbox", "_INBOX_search.>"},
			} {
				sub, err := nc.SubscribeSync(tc.subject)
				if err != nil {
					t.Fatalf("%s: subscribe: %v", tc.name, err)
				}
				errs.violation(t, tc.name, tc.subject)
				// The subscription itself reports it too.
				if _, err := sub.NextMsg(time.Second); !errors.Is(err, nats.ErrPermissionViolation) {
					t.Errorf("%s: next message: got %v, want a permissions violation", tc.name, err)
				}
			}
			for _, tc := range []struct{ name, subject string }{
				{"read search's version from the stream", "$JS.API.DIRECT.GET.CUECAST.cc.search.v.ranking"},
				{"read search's version from its mirror", "$JS.API.DIRECT.GET.CUECAST_search.cc.search.v.ranking"},
				{"read by sequence from the whole stream", "$JS.API.DIRECT.GET.CUECAST"},
				{"read search's pointer", "$JS.API.DIRECT.GET.CUECAST.cc.search.p.7.ranking"},
				{"publish a pointer", "cc.payments.p.7.checkout"},
				{"publish a version", "cc.payments.v.checkout"},
				{"publish a report for another namespace", "ccs.search.web-1.ranking"},
				{"write a pointer through the JetStream API", "$JS.API.STREAM.PURGE.CUECAST"},
			} {
				if err := nc.Publish(tc.subject, []byte(`{}`)); err != nil {
					t.Fatalf("%s: publish: %v", tc.name, err)
				}
				errs.violation(t, tc.name, tc.subject)
			}
			// Its own reports go through.
			if err := nc.Publish("ccs.payments.web-1.checkout", []byte(`{}`)); err != nil {
				t.Fatalf("report: %v", err)
			}
			if err := nc.FlushWithContext(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			select {
			case err := <-errs:
				t.Errorf("own report: %v", err)
			default:
			}
		})
	}

	t.Run("operator reads status", func(t *testing.T) {
		errs := asyncErrs(make(chan error, 16))
		nc := tr.Hub.Connect(t, natsconf.OperatorUser, errs.option())
		od, err := distributor.Open(ctx, nc, distributor.Options{})
		if err != nil {
			t.Fatalf("open distributor as operator: %v", err)
		}
		st, err := od.Status(ctx)
		if err != nil {
			select {
			case aerr := <-errs:
				t.Fatalf("status: %v (async: %v)", err, aerr)
			default:
				t.Fatalf("status: %v", err)
			}
		}
		if len(st) != 2 {
			t.Errorf("status of %d configs, want 2", len(st))
		}
		// status --wait follows the reports live: a service's report sent
		// on a leaf reaches the operator's subscription on the hub.
		w, err := od.WatchReports(ctx, checkout)
		if err != nil {
			t.Fatalf("watch reports as operator: %v", err)
		}
		defer w.Stop()
		svc := tr.Leaves[0].Connect(t, natsconf.ServiceUser("payments"))
		report, _ := json.Marshal(cuecast.Report{Instance: "web-9", Config: checkout, Version: 1, Healthy: true, At: time.Now()})
		natstest.Eventually(t, 10*time.Second, "the leaf's report in the operator's live view", func() (bool, string) {
			if err := svc.Publish(cuecast.ReportSubject(checkout, "web-9"), report); err != nil {
				return false, err.Error()
			}
			rs := w.Live()
			return slices.ContainsFunc(rs, func(r cuecast.Report) bool { return r.Instance == "web-9" }), fmt.Sprintf("%d live reports", len(rs))
		})
		if err := nc.Publish("cc.payments.p.7.checkout", []byte(`{}`)); err != nil {
			t.Fatalf("publish: %v", err)
		}
		errs.violation(t, "operator publishing a pointer", "cc.payments.p.7.checkout")
	})
}
