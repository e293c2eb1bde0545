package natsconf_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestConsumerDeliveryOnAPISubject settles whether a push consumer whose
// deliver subject is a JetStream API subject has its deliveries executed
// as requests of its account, as a direct get's answers were (a stored
// message's body parses as a purge request that purges everything). A
// compromised node creates, through its leafnode link, consumers upstream
// (on the hub's fan-out mirror, the one stream the link reaches there, and
// on the region's mirror) delivering on the local API of the hub and the
// region, on the hub's own
// domain API and on the region's, also with interest in those subjects
// from below; a control consumer delivering on an ordinary subject shows
// when the others would have delivered. None delivers, none purges: the
// account's JetStream API is no interest a consumer sees (the consumer
// stays inactive until its inactive threshold deletes it), and the leafnode
// links do not carry $JS.API interest between domains (docs/SECURITY.md).
func TestConsumerDeliveryOnAPISubject(t *testing.T) {
	st := startSuiteTree(t, false)
	node := st.servers[2]
	nc := node.Connect(t, natsconf.DistributorUser)
	for _, subj := range []string{"$JS.API.STREAM.PURGE.CUECAST", "$JS.API.STREAM.PURGE." + cuecast.FanoutStream, "$JS.API.STREAM.PURGE.CUECAST_search"} {
		if _, err := nc.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	var control atomic.Int64
	if _, err := nc.Subscribe("probe.control", func(*nats.Msg) { control.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, st.dist, st.domains)
	type evil struct{ api, stream, name, deliver string }
	cs := []evil{
		{"$JS.hub.API", cuecast.FanoutStream, "evil0", "$JS.API.STREAM.PURGE." + cuecast.FanoutStream},
		{"$JS.hub.API", cuecast.FanoutStream, "evil1", "$JS.API.STREAM.PURGE.CUECAST"},
		{"$JS.eu-west.API", "CUECAST_payments", "evil2", "$JS.API.STREAM.PURGE.CUECAST_search"},
		{"$JS.hub.API", cuecast.FanoutStream, "evil3", "$JS.eu-west.API.STREAM.PURGE.CUECAST_search"},
		{"$JS.hub.API", cuecast.FanoutStream, "evil4", "$JS.hub.API.STREAM.PURGE." + cuecast.FanoutStream},
		{"$JS.hub.API", cuecast.FanoutStream, "control", "probe.control"},
	}
	for _, c := range cs {
		body := fmt.Sprintf(`{"stream_name":%q,"config":{"name":%q,"deliver_subject":%q,"ack_policy":"none","deliver_policy":"all"}}`, c.stream, c.name, c.deliver)
		m, err := nc.Request(c.api+".CONSUMER.CREATE."+c.stream+"."+c.name, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("create consumer %s: %v", c.name, err)
		}
		var r struct {
			Error *struct{ Description string } `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Error != nil {
			t.Fatalf("create consumer %s: %s", c.name, m.Data)
		}
	}
	want := int64(streamState(t, st.dist, "fanout", cuecast.FanoutStream).Msgs)
	poll.Until(t, "the control consumer delivered the stream", poll.Patience, func() (bool, string) {
		n := control.Load()
		return n >= want, fmt.Sprintf("%d of %d messages", n, want)
	})
	for _, c := range cs[:len(cs)-1] {
		// Read as serve, from above: the link may not ask (natsconf.LeafAllowed).
		api := strings.Replace(c.api, "$JS.hub.API", cuecast.FanoutAdminPrefix, 1)
		m := request(t, st.dist, fmt.Sprintf("%s.CONSUMER.INFO.%s.%s", api, c.stream, c.name), nil)
		var info struct {
			Delivered struct {
				Consumer uint64 `json:"consumer_seq"`
			} `json:"delivered"`
		}
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatalf("consumer info %s: %v", c.name, err)
		}
		if info.Delivered.Consumer != 0 {
			t.Errorf("consumer %s on %s delivered %d messages on %s", c.name, c.stream, info.Delivered.Consumer, c.deliver)
		}
	}
	for _, d := range before.diff(snapshot(t, st.dist, st.domains)) {
		t.Errorf("store changed by consumers delivering on API subjects: %s", d)
	}
}
