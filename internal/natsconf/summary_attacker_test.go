package natsconf_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestRegionLinkSpeaksOnlyForItself plays a compromised region host with
// exactly what it holds: its own region's link credential
// (natsconf.RegionUser("leaf-1")) and the plain links' one (LeafUser). With
// them it sends the hub a summary and a drill-down answer in the name of
// the other region, an instance report (a summarising region's reports
// stay in the region), and, as a plain link, a summary at all. The hub
// stores none of them and hears no such answer: the other region's
// summary is still its own, and its next one is stored.
func TestRegionLinkSpeaksOnlyForItself(t *testing.T) {
	tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 2, Namespaces: []string{"payments"}, Regions: true})
	hub := tr.Hub.Connect(t, natsconf.DistributorUser)
	if _, err := distributor.New(t.Context(), hub, distributor.Options{}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(hub)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := js.Stream(t.Context(), cuecast.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	const cfg = cuecast.ConfigPath("payments/checkout")
	summary := func(region string, n int) []byte {
		var rs []cuecast.Report
		for i := range n {
			rs = append(rs, cuecast.Report{Instance: fmt.Sprintf("%s-web-%d", region, i), Config: cfg, Version: 1, Healthy: true})
		}
		b, err := json.Marshal(distributor.BuildSummary(region, cfg, rs, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stored := func(subject string) (string, bool) {
		m, err := reports.GetLastMsgForSubject(t.Context(), subject)
		if err != nil {
			return err.Error(), false
		}
		return string(m.Data), true
	}
	// The honest region 2 sends its summary up its own link.
	west := tr.Leaves[1].Connect(t, natsconf.DistributorUser)
	westSubj := cuecast.SummarySubject("leaf-2", cfg)
	// sendWest sends region 2's summary s and waits until the hub stores it.
	sendWest := func(what string, s []byte) {
		t.Helper()
		if err := west.Publish(westSubj, s); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, what, poll.Patience, func() (bool, string) {
			data, ok := stored(westSubj)
			return ok && data == string(s), data
		})
	}
	honest := summary("leaf-2", 3)
	sendWest("region 2's summary at the hub", honest)

	// The link credentials are no client login: on the hub's client port
	// they are refused, so the attacker's way in is a server of its own.
	for _, user := range []string{natsconf.RegionUser("leaf-1"), natsconf.LeafUser} {
		if nc, err := nats.Connect(tr.Hub.ClientURL(), nats.UserInfo(user, tr.Passwords[user]), nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("%s logged in to the hub's client port", user)
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s on the hub's client port: %v, want an authorization error", user, err)
		}
	}

	// The attacker's own server, linked to the hub with region 1's
	// credential (account R1) and the plain links' (account L).
	dir := t.TempDir()
	remote := func(user, account string) string {
		u := url.URL{Scheme: "nats-leaf", Host: tr.Hub.LeafAddr, User: url.UserPassword(user, tr.Passwords[user])}
		return fmt.Sprintf("{ urls: [%q], account: %q }", u.String(), account)
	}
	conf := fmt.Sprintf(`server_name: "evil"
host: "127.0.0.1"
port: -1
accounts {
  R1 { users: [{user: "r", password: "r"}] }
  L { users: [{user: "l", password: "l"}] }
}
leafnodes { remotes = [ %s, %s ] }
`, remote(natsconf.RegionUser("leaf-1"), "R1"), remote(natsconf.LeafUser, "L"))
	evil := natstest.StartConfFile(t, dir, "evil.conf", conf)
	s := evil.Server
	poll.Until(t, "the attacker linked to the hub twice", poll.Patience, func() (bool, string) {
		return s.NumLeafNodes() == 2, fmt.Sprintf("%d links", s.NumLeafNodes())
	})
	// The hub's side of drill-downs: every answer that reaches it.
	answers := make(chan *nats.Msg, 1024)
	if _, err := hub.ChanSubscribe(cuecast.DetailReplyPrefix+".>", answers); err != nil {
		t.Fatal(err)
	}
	if err := hub.Flush(); err != nil {
		t.Fatal(err)
	}
	asRegion := evil.Connect(t, nats.UserInfo("r", "r"))
	asLeaf := evil.Connect(t, nats.UserInfo("l", "l"))
	forged := summary("leaf-2", 999)
	eastSubj := cuecast.SummarySubject("leaf-1", cfg)
	plainForged := summary("leaf-1", 777)
	reportSubj := cuecast.ReportSubject(cfg, "leaf-2-web-0")
	badReport, _ := json.Marshal(cuecast.Report{Instance: "leaf-2-web-0", Config: cfg, Version: 9, Healthy: false})
	attack := func() {
		_ = asRegion.Publish(westSubj, forged)
		_ = asRegion.Publish(reportSubj, badReport)
		_ = asRegion.Publish(cuecast.DetailReplySubject("leaf-2", "forged"), []byte(`{"region":"leaf-2","reports":[]}`))
		_ = asLeaf.Publish(eastSubj, plainForged)
		_ = asRegion.Flush()
		_ = asLeaf.Flush()
	}
	attack()
	// Barrier: what each link may send, after the attack on the same
	// connection, reaches the hub (a link a violation closed comes back;
	// the attack is repeated then, so it is processed before the marker).
	marker := 0
	poll.Until(t, "the attacker's own messages after the attack", poll.Patience, func() (bool, string) {
		marker++
		own := summary("leaf-1", marker)
		// An answer of its own region before the summary on the same link:
		// the hub's connection, which reads the summary back, has heard it
		// once the summary is stored.
		_ = asRegion.Publish(cuecast.DetailReplySubject("leaf-1", fmt.Sprint("m", marker)), []byte(`{"region":"leaf-1","reports":[]}`))
		if err := asRegion.Publish(eastSubj, own); err != nil {
			return false, err.Error()
		}
		leafMarker, _ := json.Marshal(cuecast.Report{Instance: "marker", Config: cfg, Version: uint64(marker), Healthy: true})
		if err := asLeaf.Publish(cuecast.ReportSubject(cfg, "marker"), leafMarker); err != nil {
			return false, err.Error()
		}
		_, regionThrough := stored(eastSubj)
		_, leafThrough := stored(cuecast.ReportSubject(cfg, "marker"))
		if !regionThrough || !leafThrough {
			attack()
		}
		return regionThrough && leafThrough, fmt.Sprintf("region link through: %v, plain link through: %v", regionThrough, leafThrough)
	})

	// Its own region's answers reach the hub, the other region's none.
	ownAnswer := false
	for len(answers) > 0 {
		m := <-answers
		switch region, _, _ := cuecast.ParseDetailReplySubject(m.Subject); region {
		case "leaf-1":
			ownAnswer = true
		default:
			t.Errorf("the hub heard a drill-down answer on %s from region 1's link", m.Subject)
		}
	}
	if !ownAnswer {
		t.Errorf("none of region 1's own drill-down answers reached the hub")
	}

	// Nothing the attacker forged is stored.
	if data, _ := stored(westSubj); data != string(honest) {
		t.Errorf("region 2's summary at the hub is now %.120s", data)
	}
	if data, ok := stored(reportSubj); ok {
		t.Errorf("a summarising region's link stored an instance report: %.120s", data)
	}
	if data, _ := stored(eastSubj); data == string(plainForged) {
		t.Errorf("a plain link stored a region's summary")
	}
	// Everyone else still gets through: region 2's next summary.
	sendWest("region 2's next summary at the hub", summary("leaf-2", 4))
}

// TestSummarizerCredsOnlyAtTheirRegion plays the host of region leaf-1
// with its summarizer's credential (natsconf.SummarizerUser("leaf-1")),
// which reads every instance report at its region's server: at region
// leaf-2's server and at the hub's client port it is refused, in both
// modes. Before, in operator (JWT) mode the fan-out account signed it, as
// it signs every region's mirrors, so it logged in at leaf-2's server and
// read leaf-2's instances' reports, and at the hub's. Its own region's
// server still takes it (the summarising tests run over it).
func TestSummarizerCredsOnlyAtTheirRegion(t *testing.T) {
	t.Parallel()
	for _, jwtMode := range []bool{false, true} {
		t.Run(map[bool]string{false: "password", true: "jwt"}[jwtMode], func(t *testing.T) {
			t.Parallel()
			tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 2, Namespaces: []string{"payments"}, Regions: true, JWT: jwtMode})
			user := natsconf.SummarizerUser("leaf-1")
			auth := nats.UserInfo(user, tr.Passwords[user])
			if jwtMode {
				auth = nats.UserCredentials(tr.Creds(t, user))
			}
			for _, s := range []*natstest.TreeServer{tr.Leaves[1], tr.Hub} {
				if nc, err := nats.Connect(s.ClientURL(), auth, nats.NoReconnect(), nats.Timeout(5*time.Second)); err == nil {
					nc.Close()
					t.Errorf("%s logged in at %s", user, s.Spec.Name)
				} else if !errors.Is(err, nats.ErrAuthorization) {
					t.Errorf("%s at %s: %v, want an authorization error", user, s.Spec.Name, err)
				}
			}
			tr.Leaves[0].Connect(t, user).Close()
		})
	}
}
