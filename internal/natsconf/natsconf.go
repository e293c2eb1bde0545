package natsconf

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/cuecast/cuecast"
)

// ErrInvalidSpec is wrapped by every error Generate returns for a Spec that
// cannot produce a working server.
var ErrInvalidSpec = errors.New("invalid nats config spec")

// Level is a server's place in the fan-out tree.
type Level string

// The three levels of the tree.
const (
	// Hub is the central cluster holding the CUECAST stream (R3).
	Hub Level = "hub"
	// Leaf is a regional leaf cluster: its own domain, mirrors of the hub.
	Leaf Level = "leaf"
	// Node is a node-local leaf server: its own domain, mirrors of its region.
	Node Level = "node"
	// Standalone is a single server holding the CUECAST stream, without
	// cluster or leafnodes: serve's embedded server with --secure. Its
	// namespaces' mirrors are in its own domain (MirrorSpec.NoRePublish).
	Standalone Level = "standalone"
)

// The account and user names every generated configuration uses.
const (
	// Account holds cuecast's streams, its JetStream and every user of it.
	Account = "CUECAST"
	// SystemAccount is the server's system account.
	SystemAccount = "SYS"
	// OperatorAccount holds the operator: no JetStream, no stream; it
	// reaches the CUECAST account only through the imports OperatorImports
	// lists (docs/SECURITY.md).
	OperatorAccount = "OPERATOR"
	// DistributorUser writes versions and pointers (serve, the tailer, the
	// rollout controller) and administers the mirrors.
	DistributorUser = "distributor"
	// OperatorUser reads status: versions, pointers and reports, never writes.
	OperatorUser = "operator"
	// LeafUser is what a lower level's leafnode remote logs in as.
	LeafUser = "leaf"
	// SystemUser logs into the system account (monitoring).
	SystemUser = "sys"
	// HubDomain is the hub's JetStream domain unless Spec.Domain says otherwise.
	HubDomain = "hub"
	// Stream is the distributor's stream (cuecast.Stream); MirrorPrefix
	// plus a namespace names that namespace's mirror.
	Stream       = "CUECAST"
	MirrorPrefix = "CUECAST_"
	reportStream = "CUECAST_REPORTS"
	// The rollout controller's state (distributor/rollout).
	rolloutStream = "KV_cuecast-rollouts"
	// The tailer's cursors (tailer.Bucket), which status shows.
	tailerStream = "KV_cuecast-tailer"
	auditStream  = "CUECAST_AUDIT"
)

// The hub's fan-out account (docs/SECURITY.md, a compromised node or leaf
// host): the leafnode links from below are bound to it, never to CUECAST.
const (
	// FanoutAccount holds cuecast.FanoutStream, a mirror of CUECAST, which the
	// regions' mirrors read; its own streams capture no subject, so
	// nothing JetStream publishes there for a link (an answer on the
	// link's reply subject, a consumer's deliveries) is stored.
	FanoutAccount = "FANOUT"
)

// ServiceUser is the user a namespace's services connect as.
func ServiceUser(ns string) string { return "svc-" + ns }

// ServiceAccount is the account of a namespace's services. It holds no
// stream: it imports from the CUECAST account the direct gets of the
// namespace's mirror and its reports' subjects as services, and the
// namespace's updates (ccr.<ns>.>) as a stream. A service import rewrites
// the reply subject (to _R_.…) in the CUECAST account, so whatever reply
// subject a service gives a request, JetStream's answer reaches only the
// requester, back in its own account: it cannot be stored in or delivered
// on any subject of the CUECAST account (docs/SECURITY.md).
func ServiceAccount(ns string) string { return "SVC_" + ns }

// serviceImport is one subject the CUECAST account exports to a
// namespace's account or the operator's.
type serviceImport struct {
	subject string
	stream  bool // a stream export (messages flow in); else a service
	// streamed: a service answering with several messages (a batched
	// direct get), whose responses the import must let through until the
	// end of the batch. The server keeps each request's response mapping
	// for two minutes then, so only the bare $JS.API.DIRECT.GET.<stream>
	// is streamed: its .<subject> form (last by subject, every watcher's
	// read) answers one message, and its mapping goes with the answer.
	streamed bool
	// to, when set, is the subject the importing account requests it on.
	to string
}

// local is the subject the importing account uses.
func (im serviceImport) local() string { return cmp.Or(im.to, im.subject) }

// ReportStreamInfo is the subject, in the operator's account, of the
// report stream's information: its max age is how long a report stays
// live, which serve sets from its heartbeat and `status --wait` needs.
const ReportStreamInfo = cuecast.OperatorAPIPrefix + ".STREAM.INFO." + reportStream

// operatorStreams are the streams the operator reads, by direct get only.
var operatorStreams = []string{Stream, reportStream, rolloutStream, auditStream, tailerStream}

// OperatorImports are the exports of the CUECAST account the operator's
// account reaches (named as it requests them), the only ways out of it:
// the direct gets of every stream it reads (batched: responses streamed;
// last by subject: one answer),
// the report stream's information (ReportStreamInfo), its two writes (rollout
// records by compare-and-swap, audit entries), and the updates and reports
// it follows live. Like a namespace's, its account rewrites the reply
// subject of every request it makes, so no answer is stored in or
// delivered on a subject of the CUECAST account; and it reaches no
// JetStream management API but that one read (no consumer, whose deliver
// subject no permission sees), which an account without JetStream is not
// answered on through an import anyway.
func OperatorImports() []string {
	var out []string
	for _, im := range operatorImports() {
		out = append(out, im.local())
	}
	return out
}

func operatorImports() []serviceImport {
	var im []serviceImport
	for _, st := range operatorStreams {
		im = append(im,
			serviceImport{subject: "$JS.API.DIRECT.GET." + st, streamed: true},
			serviceImport{subject: "$JS.API.DIRECT.GET." + st + ".>"},
		)
	}
	return append(im,
		// A read of one stream's information, answered like every request
		// through an import: to the requester alone.
		serviceImport{subject: "$JS.API.STREAM.INFO." + reportStream, to: ReportStreamInfo},
		serviceImport{subject: "$KV." + strings.TrimPrefix(rolloutStream, "KV_") + ".>"},
		serviceImport{subject: "cca.>"},
		serviceImport{subject: "ccr.>", stream: true},
		serviceImport{subject: "ccs.>", stream: true},
	)
}

// serviceImports are the exports of the CUECAST account a namespace's
// services reach: the only ways out of their account. The direct gets
// answer a batched get with several messages (streamed), which the import
// lets through only as a stream response; a last-by-subject get, with one
// message, which a singleton response lets through and then forgets.
func serviceImports(ns string) []serviceImport {
	return []serviceImport{
		{subject: "$JS.API.DIRECT.GET." + MirrorStream(ns), streamed: true},
		{subject: "$JS.API.DIRECT.GET." + MirrorStream(ns) + ".>"},
		{subject: "ccs." + ns + ".>"},
		{subject: "ccr." + ns + ".>", stream: true},
	}
}

// fanoutImports are the exports of the CUECAST account the hub's fan-out
// account (FanoutAccount) reaches: the creation of its mirror's consumer
// (imported under cuecast.FanoutAPIPrefix; its deliveries under cuecast.FanoutDeliverPrefix
// and its flow control), and reports, which the links carry up.
//
// Only the filtered form of the consumer creation
// ($JS.API.CONSUMER.CREATE.CUECAST.<name>.<filter>, FanoutConfig filters
// on cc.>): an import of a literal subject is interest a consumer the link
// created would deliver on, and its deliveries would reach CUECAST's API.
func fanoutImports() []serviceImport {
	create := "$JS.API.CONSUMER.CREATE." + Stream + ".>"
	return []serviceImport{
		{subject: create, to: cuecast.FanoutAPIPrefix + ".CONSUMER.CREATE." + Stream + ".>"},
		{subject: "$JS.FC." + Stream + ".>"},
		{subject: cuecast.FanoutDeliverPrefix + ".>", stream: true},
		{subject: "ccs.>"},
		{subject: cuecast.SummaryPrefix + ".>"},
		// The regions' answers to drill-down requests, each on its
		// region's own subject (RegionAllowed).
		{subject: cuecast.DetailReplyPrefix + ".>"},
	}
}

// fanoutExports are what the CUECAST account imports from FanoutAccount:
// its JetStream API under cuecast.FanoutAdminPrefix (serve manages cuecast.FanoutStream),
// and the lower domains' APIs, which reach them through the links
// (`nats-config mirrors` from the hub).
func fanoutExports() []serviceImport {
	return []serviceImport{
		{subject: "$JS.API.>", to: cuecast.FanoutAdminPrefix + ".>"},
		{subject: "$JS.*.API.>"},
		// Drill-down requests to the regions' summarizers, each of which
		// answers: streamed, so that every answer gets through.
		{subject: cuecast.DetailPrefix + ".>", streamed: true},
	}
}

// operatorFanoutReports is what the operator's account imports from the
// hub's fan-out account: the reports the links carry up, followed live.
var operatorFanoutReports = serviceImport{subject: "ccs.>", stream: true}

// operatorFanoutSummaries is the same for the regions' summaries.
var operatorFanoutSummaries = serviceImport{subject: cuecast.SummaryPrefix + ".>", stream: true}

// operatorFanoutDetail are what the operator's account imports from the
// hub's fan-out account to drill down into a summarised region (`status
// --instances`): the requests to the regions' summarizers, and their
// answers, each on its region's own subject.
var operatorFanoutDetail = []serviceImport{
	{subject: cuecast.DetailPrefix + ".>", streamed: true},
	{subject: cuecast.DetailReplyPrefix + ".>", stream: true},
}

// operatorFanout are every import of the operator's account from the
// hub's fan-out account.
func operatorFanout() []serviceImport {
	return append([]serviceImport{operatorFanoutReports, operatorFanoutSummaries}, operatorFanoutDetail...)
}

// MirrorStream is the stream holding one namespace's versions and pointers in
// every domain; services direct-get from it and from nothing else.
func MirrorStream(ns string) string { return MirrorPrefix + ns }

// InboxPrefix is the inbox prefix a namespace's services must connect with
// (nats.CustomInboxPrefix): they may subscribe to no other inbox, so replies
// to one namespace's reads never reach another's.
func InboxPrefix(ns string) string { return "_INBOX_" + ns }

// InstanceInboxPrefix is the inbox prefix of one instance of namespace ns,
// _INBOX_<ns>.<instance>: below the namespace's (InboxPrefix), so it works
// with the namespace's password too, and the only one an instance's own
// credential (InstanceCreds) may receive replies on. A direct get's answer
// goes to whatever reply subject its requester names, so an instance that
// could subscribe to another's inbox could learn its reply subjects and
// answer its reads for it (docs/SECURITY.md).
func InstanceInboxPrefix(ns, instance string) string { return InboxPrefix(ns) + "." + instance }

// Spec describes one server of the tree.
type Spec struct {
	Level Level
	// Name is the server name (unique in the tree).
	Name string
	// Domain is the JetStream domain; default HubDomain for the hub and Name
	// for leaf and node servers. The servers of one cluster share a domain.
	Domain string
	// Listen is the client address; default "0.0.0.0:4222".
	Listen string
	// StoreDir holds the JetStream store (required).
	StoreDir string
	// Cluster, on hub and leaf levels, makes the server part of a cluster.
	Cluster *Cluster
	// LeafListen is where lower levels connect (hub and leaf levels);
	// default "0.0.0.0:7422".
	LeafListen string
	// Upstreams are the leafnode addresses (host:port) of the level above,
	// one server per entry (leaf and node levels).
	Upstreams []string
	// Namespaces get a service user each.
	Namespaces []string
	// Passwords holds a password per user (see Users); all are required.
	Passwords map[string]string
	// TLS, when set, secures the client, cluster and leafnode listeners and
	// the leafnode remotes.
	TLS *TLS
	// Keys switches to operator (JWT) mode: the accounts are JWTs signed by
	// Keys.Operator, users log in with .creds files from Keys.UserCreds (the
	// same permissions as the password users) and Passwords is unused.
	Keys *Keys
	// LeafCreds is the .creds file of LeafUser the leafnode remote logs in
	// with, in operator mode (leaf and node levels); of RegionUser(Region)
	// when Region is set.
	LeafCreds string
	// Regions, on the hub, are the regions whose summarizers send summaries
	// up (docs/SCALING.md, "Reports summarised per region"): each region's
	// link logs in as RegionUser(region), which may publish that region's
	// summaries and no other's, and no instance report. Users lists their
	// summarizers' users too (SummarizerUser), which the hub's
	// configuration does not hold: the regions' do.
	Regions []string
	// Region, on a leaf or node server linked to the hub, makes it a
	// summarising region: its link logs in as RegionUser(Region) and
	// carries its summarizer's summaries up instead of its instances'
	// reports (deny_exports ccs.>), and its configuration holds the
	// region's summarizer's user (SummarizerUser).
	Region string
	// HashCost is the bcrypt cost of the password hashes the configuration
	// holds; default bcrypt.MinCost. The server pays it on every login,
	// and the passwords nats-config and serve create are 192 random bits,
	// which no cost makes harder to guess: the hash only keeps the
	// configuration from holding a password a client could log in with.
	HashCost int
}

// Cluster is a server's cluster membership.
type Cluster struct {
	Name   string
	Listen string
	// Routes are the other members' cluster addresses (host:port).
	Routes []string
	// Password authenticates the routes (required): every member of the
	// cluster has the same one, and refuses a route that does not log in
	// as RouteUser(Name) with it. A route carries every account's traffic
	// past their users and permissions, and TLS's verify admits any
	// certificate of the tree's CA, which every node host holds.
	Password string
}

// RouteUser is the user the routes of cluster log in as; its password
// (Cluster.Password) is the cluster's own, so that a region's hosts cannot
// route into the hub's cluster.
func RouteUser(cluster string) string { return "route-" + cluster }

// TLS names PEM files. CA verifies the peer: servers verify client
// certificates only when VerifyClients is set; remotes always verify the
// server they dial with CA.
type TLS struct {
	Cert, Key, CA string
	VerifyClients bool
}

// Users lists the users of a Spec (each needs a password, or a .creds file
// in operator mode), sorted.
func (s Spec) Users() []string {
	// Every level needs LeafUser: the hub accepts it, a node's remote logs
	// in with it, a regional leaf does both.
	u := []string{DistributorUser, LeafUser, OperatorUser, SystemUser}
	if s.Level == Standalone {
		u = []string{DistributorUser, OperatorUser, SystemUser}
	}
	for _, ns := range s.Namespaces {
		u = append(u, ServiceUser(ns))
	}
	if s.Level == Hub {
		// The regions' summarizers log in at their regions, not here, but
		// the tree shares one secrets directory, which the hub (generated
		// first) fills: their credentials exist before the regions do.
		for _, r := range s.Regions {
			u = append(u, RegionUser(r), SummarizerUser(r))
		}
	}
	if s.Region != "" {
		u = append(u, RegionUser(s.Region), SummarizerUser(s.Region))
	}
	slices.Sort(u)
	return slices.Compact(u)
}

func (s *Spec) setDefaults() {
	if s.Domain == "" {
		if s.Level == Hub || s.Level == Standalone {
			s.Domain = HubDomain
		} else {
			s.Domain = s.Name
		}
	}
	if s.Listen == "" {
		s.Listen = "0.0.0.0:4222"
	}
	if s.LeafListen == "" && (s.Level == Hub || s.Level == Leaf) {
		s.LeafListen = "0.0.0.0:7422"
	}
}

// Validate reports a spec that cannot produce a working server; errors wrap
// ErrInvalidSpec.
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, args...))
	}
	switch s.Level {
	case Hub, Leaf, Node, Standalone:
	default:
		return bad("level %q: want hub, leaf, node or standalone", s.Level)
	}
	if !validName(s.Name) {
		return bad("server name %q: want 1-64 of [A-Za-z0-9_-]", s.Name)
	}
	if s.Domain != "" && !validName(s.Domain) {
		return bad("domain %q: want 1-64 of [A-Za-z0-9_-]", s.Domain)
	}
	if s.StoreDir == "" {
		return bad("a JetStream store directory is required")
	}
	for _, a := range []string{s.Listen, s.LeafListen} {
		if a != "" {
			if err := checkHostPort(a); err != nil {
				return bad("%v", err)
			}
		}
	}
	switch s.Level {
	case Hub, Standalone:
		if len(s.Upstreams) > 0 {
			return bad("the %s server has no upstream", s.Level)
		}
	case Leaf, Node:
		if len(s.Upstreams) == 0 {
			return bad("a %s server needs at least one upstream (the leafnode address of the level above)", s.Level)
		}
	}
	if (s.Level == Node || s.Level == Standalone) && s.Cluster != nil {
		return bad("a %s server is not clustered", s.Level)
	}
	if (s.Level == Node || s.Level == Standalone) && s.LeafListen != "" {
		return bad("a %s server accepts no leafnodes", s.Level)
	}
	for _, u := range s.Upstreams {
		if err := checkHostPort(u); err != nil {
			return bad("upstream: %v", err)
		}
	}
	if c := s.Cluster; c != nil {
		if !validName(c.Name) {
			return bad("cluster name %q: want 1-64 of [A-Za-z0-9_-]", c.Name)
		}
		if err := checkHostPort(c.Listen); err != nil {
			return bad("cluster: %v", err)
		}
		for _, r := range c.Routes {
			if err := checkHostPort(r); err != nil {
				return bad("cluster route: %v", err)
			}
		}
		if c.Password == "" {
			return bad("cluster %s: no route password: without one any server that reaches the cluster address routes in", c.Name)
		}
	}
	for _, r := range append(slices.Clone(s.Regions), s.Region) {
		if r != "" && !cuecast.ValidSegment(r) {
			return bad("region %q: must match [a-z0-9][a-z0-9_-]*", r)
		}
	}
	if len(s.Regions) > 0 && s.Level != Hub {
		return bad("only the hub lists the regions (a %s server is one: Region)", s.Level)
	}
	if s.Region != "" && s.Level != Leaf && s.Level != Node {
		return bad("a %s server is no region", s.Level)
	}
	seen := map[string]bool{}
	for _, ns := range s.Namespaces {
		if !cuecast.ValidSegment(ns) {
			return bad("namespace %q: must match [a-z0-9][a-z0-9_-]*", ns)
		}
		if seen[ns] {
			return bad("namespace %q given twice", ns)
		}
		seen[ns] = true
	}
	if s.Keys == nil {
		for _, u := range s.Users() {
			if s.Passwords[u] == "" {
				return bad("no password for user %q", u)
			}
		}
	} else if s.Level != Hub && s.LeafCreds == "" {
		return bad("operator mode: the leafnode remote needs the %s .creds file", LeafUser)
	}
	if t := s.TLS; t != nil {
		if (t.Cert == "") != (t.Key == "") {
			return bad("tls: give both a certificate and a key")
		}
		if t.Cert == "" {
			// A CA alone would write TLS blocks without a certificate, which
			// no client and no leafnode can complete a handshake with.
			return bad("tls: every server needs its own certificate and key (--tls-cert, --tls-key), not only a CA")
		}
		if t.CA == "" && s.Level != Standalone {
			return bad("tls: give the CA (--tls-ca) that signed the servers' certificates: leafnode remotes and routes verify their peers with it")
		}
		if t.VerifyClients && t.CA == "" {
			return bad("tls: verifying clients needs a CA")
		}
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func checkHostPort(a string) error {
	_, p, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("address %q: %w", a, err)
	}
	// -1 asks the server to pick a free port.
	if n, err := strconv.Atoi(p); err != nil || n < -1 || n > 65535 {
		return fmt.Errorf("address %q: bad port", a)
	}
	return nil
}

// Permissions of one user: subjects it may publish to and subscribe to.
type Permissions struct {
	Publish   []string
	Subscribe []string
	// PublishDeny and SubscribeDeny, when set, are subjects denied within
	// Publish and Subscribe (with Publish empty: within every subject).
	PublishDeny   []string
	SubscribeDeny []string
	// ConnectionTypes, when set, are the only kinds of connection the user
	// may log in with (nats-server's allowed_connection_types).
	ConnectionTypes []string
}

// ConnectionLeafnode is the connection type of a leafnode link
// (jwt.ConnectionTypeLeafnode).
const ConnectionLeafnode = "LEAFNODE"

// UserPermissions returns the permissions of user in the CUECAST account;
// ok is false for a user that has no fixed permissions (the distributor may
// do anything in the account) or no such user.
//
// A namespace's services may subscribe to ccr.<ns>.> and to their own inbox,
// direct-get from their namespace's mirror stream only (a direct get by
// sequence names no subject, so it is scoped by the stream, which holds only
// the namespace: see MirrorStream) and publish reports on ccs.<ns>.>.
// Operators may read the streams and reports and watch every update.
func UserPermissions(user string) (Permissions, bool) {
	switch {
	case user == OperatorUser:
		// The operator's account (OperatorAccount) reaches CUECAST only
		// through its imports: direct gets of what it reads; the config's
		// record in the rollout bucket (compare-and-swap) and the audit
		// stream, which steering a rollout writes (serve's controller then
		// moves the pointers). No stream's configuration or contents
		// otherwise, and no consumer. The permissions say the same.
		var pub []string
		for _, im := range operatorImports() {
			if !im.stream {
				pub = append(pub, im.local())
			}
		}
		// ccs.>: `status --wait` follows the reports live rather than
		// reading the report stream several times a second. ccsumq.> and
		// ccsumr.>: `status --instances` drills down into the regions.
		pub = append(pub, cuecast.DetailPrefix+".>")
		return Permissions{Publish: pub, Subscribe: []string{"_INBOX.>", "ccr.>", "ccs.>", cuecast.SummaryPrefix + ".>", cuecast.DetailReplyPrefix + ".>"}}, true
	case user == LeafUser:
		// A leafnode connection from the level below: it sends reports and
		// what its mirrors need up (LeafAllowed), never writes (LeafDenied),
		// and it is no client (LeafConnectionTypes).
		return Permissions{Publish: LeafAllowed(), PublishDeny: LeafDenied(), Subscribe: []string{">"}, SubscribeDeny: LeafNoInterest(),
			ConnectionTypes: []string{ConnectionLeafnode}}, true
	case strings.HasPrefix(user, regionUserPrefix) && cuecast.ValidSegment(strings.TrimPrefix(user, regionUserPrefix)):
		// A summarising region's link: a leafnode link like LeafUser's,
		// sending its region's summaries instead of reports.
		return Permissions{Publish: RegionAllowed(strings.TrimPrefix(user, regionUserPrefix)), PublishDeny: LeafDenied(), Subscribe: []string{">"},
			SubscribeDeny: LeafNoInterest(), ConnectionTypes: []string{ConnectionLeafnode}}, true
	case strings.HasPrefix(user, summarizerUserPrefix) && cuecast.ValidSegment(strings.TrimPrefix(user, summarizerUserPrefix)):
		return SummarizerPermissions(strings.TrimPrefix(user, summarizerUserPrefix)), true
	case strings.HasPrefix(user, "svc-"):
		ns := strings.TrimPrefix(user, "svc-")
		return Permissions{
			Publish: []string{
				"$JS.API.DIRECT.GET." + MirrorStream(ns),
				"$JS.API.DIRECT.GET." + MirrorStream(ns) + ".>",
				"ccs." + ns + ".>",
			},
			Subscribe: []string{"ccr." + ns + ".>", InboxPrefix(ns) + ".>"},
		}, true
	}
	return Permissions{}, false
}

// InstanceUser names the user of one instance of namespace ns (operator
// mode, Keys.InstanceCreds).
func InstanceUser(ns, instance string) string { return ServiceUser(ns) + "." + instance }

// ValidInstance reports whether instance can name an instance in a report
// subject (ccs.<ns>.<instance>.<name>): one subject token of up to 128
// printable characters.
func ValidInstance(instance string) bool {
	if instance == "" || len(instance) > 128 {
		return false
	}
	for _, r := range instance {
		if r <= ' ' || r == '.' || r == '*' || r == '>' || r > '~' {
			return false
		}
	}
	return true
}

// InstancePermissions are a service user's permissions narrowed to one
// instance: it reads what its namespace's services read, reports only as
// that instance (ccs.<ns>.<instance>.>), so a compromised instance cannot
// speak for another one in the health gate, and receives replies only
// under its own inbox prefix (InstanceInboxPrefix), so it cannot learn
// another instance's reply subjects to aim answers at.
func InstancePermissions(ns, instance string) Permissions {
	p, _ := UserPermissions(ServiceUser(ns))
	for i, s := range p.Publish {
		if s == "ccs."+ns+".>" {
			p.Publish[i] = "ccs." + ns + "." + instance + ".>"
		}
	}
	for i, s := range p.Subscribe {
		if s == InboxPrefix(ns)+".>" {
			p.Subscribe[i] = InstanceInboxPrefix(ns, instance) + ".>"
		}
	}
	return p
}

// LeafAllowed are the only subjects a lower level's leafnode connection
// may publish into its upstream (docs/SECURITY.md, a compromised node or
// leaf host; docs/PROTOCOL.md §9):
//
//   - ccs.>: reports;
//   - $JS.*.API.CONSUMER.CREATE.>: the creation of its mirrors' consumers
//     (nats-server names the filtered form ….<stream>.<name>.<filter>, the
//     unfiltered one ….<stream>), the only JetStream API request a mirror
//     sends upstream. Every other verb (pause, delete, reset, unpin, step
//     down, peers, next message, information, every stream verb, direct
//     and message gets, account and server requests) is refused, whatever
//     a later nats-server adds;
//   - $JS.FC.>: its mirrors' answers to their consumers' flow control;
//   - _INBOX.> and _R_.>: answers to the requests the level above sends
//     down (the JetStream API of the lower domains, `nats-config mirrors`);
//     _R_.… when they crossed a service import up there.
//
// Everything else is refused at the upstream itself, which closes the link
// on a violation: versions and pointers (cc.>), audit entries, rollout
// records, the updates instances hear (ccr.>, which only a level's own
// mirrors republish), and every JetStream delivery, acknowledgement and
// internal reply ($JS.M.>, $JS.S.>, $JS.ACK.>, $JSC.>): deliveries only
// flow down a link, so no link can feed another host's mirror.
func LeafAllowed() []string {
	return []string{"ccs.>", "$JS.*.API.CONSUMER.CREATE.>", "$JS.FC.>", "_INBOX.>", "_R_.>"}
}

// regionUserPrefix starts the name of a region's link user (RegionUser).
const regionUserPrefix = "region-"

// RegionUser is the user a summarising region's link logs in to the hub
// as: one per region, so that the hub binds a summary's region token to
// the link it came by (docs/SECURITY.md), as it binds a report's instance
// token to an instance's credential.
func RegionUser(region string) string { return regionUserPrefix + region }

// RegionAllowed are the only subjects a summarising region's link may
// publish into the hub: LeafAllowed with its own region's summaries
// (ccsum.<region>.>) and drill-down answers (ccsumr.<region>.>) in place
// of reports, which stay in the region.
func RegionAllowed(region string) []string {
	out := []string{cuecast.SummaryPrefix + "." + region + ".>", cuecast.DetailReplyPrefix + "." + region + ".>"}
	for _, s := range LeafAllowed() {
		if s != cuecast.ReportPrefix+".>" {
			out = append(out, s)
		}
	}
	return out
}

// summarizerUserPrefix starts the name of a region's summarizer's user
// (SummarizerUser).
const summarizerUserPrefix = "summarizer-"

// SummarizerUser is the user a region's `cuecast summarize` connects to
// the region's server as (SummarizerPermissions).
func SummarizerUser(region string) string { return summarizerUserPrefix + region }

// SummarizerPermissions are a region's summarizer's: it hears the
// region's reports (ccs.>) and the hub's drill-down requests (ccsumq.>),
// and publishes only its own region's summaries (ccsum.<region>.>) and
// drill-down answers (ccsumr.<region>.>). It cannot speak for another
// region, nor as an instance, nor write versions or pointers (cc.>): a
// leaked summarizer credential can misstate its own region's instances
// and nothing else (docs/SECURITY.md).
func SummarizerPermissions(region string) Permissions {
	return Permissions{
		Publish:   []string{cuecast.SummaryPrefix + "." + region + ".>", cuecast.DetailReplyPrefix + "." + region + ".>"},
		Subscribe: []string{cuecast.ReportPrefix + ".>", cuecast.DetailPrefix + ".>"},
	}
}

// LeafDenied are the subjects within LeafAllowed a lower level's leafnode
// connection may still not publish into its upstream: the hub's fan-out
// account imports these from CUECAST for its own mirror alone (the
// creation of its consumer, the consumer's deliveries and flow control),
// so a link may neither publish to them nor (LeafNoInterest) subscribe to
// them.
func LeafDenied() []string {
	return LeafNoInterest()
}

// LeafNoInterest are the subjects a lower level's leafnode connection may
// not subscribe to upstream: the hub's fan-out account imports these from
// CUECAST for its mirror alone. Interest from a link there would make a
// consumer the link created deliver on them, and a delivery the import
// then carries into CUECAST (a consumer's creation, its flow control, the
// fan-out mirror's own deliveries).
func LeafNoInterest() []string {
	return []string{cuecast.FanoutAPIPrefix + ".>", cuecast.FanoutDeliverPrefix + ".>", cuecast.FanoutAdminPrefix + ".>", "$JS.FC." + Stream + ".>"}
}

// Generate renders the nats-server configuration of one server.
func Generate(s Spec) (string, error) {
	s.setDefaults()
	if err := s.Validate(); err != nil {
		return "", fmt.Errorf("generate %s config: %w", s.Level, err)
	}
	w := &confWriter{cost: s.HashCost}
	w.comment("nats-server configuration for cuecast: %s level, server %s, JetStream domain %s.", s.Level, s.Name, s.Domain)
	w.comment("Generated by `cuecast nats-config %s`; see docs/SCALING.md.", s.Level)
	w.kv("server_name", q(s.Name))
	host, port, _ := net.SplitHostPort(s.Listen)
	w.kv("host", q(host))
	w.kv("port", port)
	var om operatorMode
	if s.Keys != nil {
		var err error
		if om, err = s.Keys.operatorMode(s.Namespaces, s.Level, s.Region); err != nil {
			return "", fmt.Errorf("generate %s config: %w", s.Level, err)
		}
		w.blank()
		w.comment("Operator (JWT) mode: users log in with .creds files (cuecast nats-config --auth jwt).")
		w.kv("operator", q(om.operatorJWT))
		w.kv("resolver", "MEMORY")
		w.open("resolver_preload")
		for _, pub := range om.preload {
			w.kv(pub, q(om.accounts[pub]))
		}
		w.close()
	}
	w.blank()
	w.open("jetstream")
	w.kv("store_dir", q(s.StoreDir))
	w.kv("domain", q(s.Domain))
	w.close()
	if s.TLS != nil {
		w.blank()
		w.tls(s.TLS, s.TLS.VerifyClients)
	}
	if c := s.Cluster; c != nil {
		w.blank()
		w.open("cluster")
		w.kv("name", q(c.Name))
		w.kv("listen", q(c.Listen))
		w.comment("A route bypasses every account's users: only a member with the cluster's")
		w.comment("password may route. In clear, not hashed: a server also dials the members")
		w.comment("it learns of with it (docs/SECURITY.md).")
		w.open("authorization")
		w.kv("user", q(RouteUser(c.Name)))
		w.kv("password", q(c.Password))
		w.close()
		if len(c.Routes) > 0 {
			var r []string
			for _, a := range c.Routes {
				u := url.URL{Scheme: "nats-route", Host: a, User: url.UserPassword(RouteUser(c.Name), c.Password)}
				r = append(r, q(u.String()))
			}
			w.list("routes", r)
		}
		if s.TLS != nil && s.TLS.Cert != "" {
			w.tls(s.TLS, s.TLS.CA != "")
		}
		w.close()
	}
	if s.LeafListen != "" || len(s.Upstreams) > 0 {
		w.blank()
		w.open("leafnodes")
		if s.LeafListen != "" {
			w.kv("listen", q(s.LeafListen))
			if s.Keys == nil {
				// At the hub the links log in to FanoutAccount, and a
				// summarising region's as its own user.
				switch {
				case s.Level == Hub && len(s.Regions) > 0:
					w.comment("The level below logs in as %s, or a region as %s<region>, of account %s", LeafUser, regionUserPrefix, FanoutAccount)
					w.comment("(accounts below), whose permissions say what it may not send up (docs/SECURITY.md).")
				case s.Level == Hub:
					w.comment("The level below logs in as %s of account %s (accounts below),", LeafUser, FanoutAccount)
					w.comment("whose permissions say what it may not send up (docs/SECURITY.md).")
				default:
					w.comment("The level below logs in as %s of account %s (accounts below),", LeafUser, Account)
					w.comment("whose permissions say what it may not send up (docs/SECURITY.md).")
				}
			}
			if s.TLS != nil && s.TLS.Cert != "" {
				w.tls(s.TLS, s.TLS.VerifyClients)
			}
		}
		if len(s.Upstreams) > 0 {
			w.comment("Updates reach this level's instances only from its own mirrors:")
			w.comment("the core ccr.> subjects do not cross the leafnode connection.")
			w.open("remotes = [")
			w.open("{")
			var urls []string
			for _, a := range s.Upstreams {
				u := url.URL{Scheme: "nats-leaf", Host: a}
				if s.Keys == nil {
					user := LeafUser
					if s.Region != "" {
						user = RegionUser(s.Region)
					}
					u.User = url.UserPassword(user, s.Passwords[user])
				}
				if s.TLS != nil {
					u.Scheme = "tls"
				}
				urls = append(urls, q(u.String()))
			}
			w.list("urls", urls)
			w.comment("Redial only these: the level above advertises its own leafnode address,")
			w.comment("which a proxy, a NAT or a load balancer in between would be bypassed for.")
			w.kv("ignore_discovered_servers", "true")
			if s.Keys != nil {
				w.kv("credentials", q(s.LeafCreds))
				w.kv("account", q(om.mainPub))
			} else {
				w.kv("account", q(Account))
			}
			w.list("deny_imports", []string{q("ccr.>")})
			if s.Region != "" {
				w.comment("A summarising region: its summarizer sends the instances' reports up as")
				w.comment("summaries (ccsum.%s.>), the reports stay here. Run next to this server", s.Region)
				w.comment("`cuecast summarize --region %s`, logged in as %s.", s.Region, SummarizerUser(s.Region))
				w.list("deny_exports", []string{q("ccr.>"), q(cuecast.ReportPrefix + ".>")})
			} else {
				w.list("deny_exports", []string{q("ccr.>")})
			}
			if s.TLS != nil {
				w.tls(s.TLS, false)
			}
			w.closeWith("}")
			w.closeWith("]")
		}
		w.close()
	}
	if s.Keys != nil {
		w.kv("system_account", q(om.systemPub))
		return w.String(), nil
	}
	w.blank()
	w.open("accounts")
	w.open(Account)
	w.kv("jetstream", "enabled")
	w.open("users = [")
	w.user(DistributorUser, s.Passwords[DistributorUser])
	if s.LeafListen != "" && s.Level != Hub {
		// A region's account holds mirrors only: nothing JetStream
		// publishes there for a node's link is stored (docs/SECURITY.md).
		w.user(LeafUser, s.Passwords[LeafUser])
	}
	if s.Region != "" {
		// The region's summarizer: it reads the reports and may speak
		// only as its region (SummarizerPermissions).
		w.user(SummarizerUser(s.Region), s.Passwords[SummarizerUser(s.Region)])
	}
	w.closeWith("]")
	if s.Level == Hub {
		w.comment("The fan-out account's JetStream API (serve manages its mirror) and, through")
		w.comment("the links bound to it, the lower domains' APIs.")
		w.open("imports = [")
		for _, im := range fanoutExports() {
			w.impFrom(im, FanoutAccount)
		}
		w.closeWith("]")
	}
	if s.Level == Standalone {
		// Without leafnodes nothing maps the domain's API onto the local
		// one (and account mappings do not apply to the streams' own
		// requests); the namespaces' mirrors read CUECAST through it.
		w.open("imports = [")
		w.line("{service: {account: %s, subject: %s}, to: %s}", q(SystemAccount), q("$JS.API.>"), q("$JS."+s.Domain+".API.>"))
		w.closeWith("]")
	}
	w.comment("The operator's account and each namespace's services reach these subjects only.")
	w.open("exports = [")
	for _, im := range operatorImports() {
		w.export(im, OperatorAccount)
	}
	for _, ns := range s.Namespaces {
		for _, im := range serviceImports(ns) {
			w.export(im, ServiceAccount(ns))
		}
	}
	if s.Level == Hub {
		for _, im := range fanoutImports() {
			w.export(im, FanoutAccount)
		}
	}
	w.closeWith("]")
	w.close()
	if s.Level == Hub {
		w.comment("The leafnode links from below log in here, never into %s: this account's", Account)
		w.comment("only stream is %s, a mirror that captures no subject, so nothing JetStream", cuecast.FanoutStream)
		w.comment("publishes for a link (an answer on its reply subject, a consumer's deliveries)")
		w.comment("is stored (docs/SECURITY.md).")
		w.open(FanoutAccount)
		w.kv("jetstream", "enabled")
		w.open("users = [")
		w.user(LeafUser, s.Passwords[LeafUser])
		for _, r := range s.Regions {
			w.user(RegionUser(r), s.Passwords[RegionUser(r)])
		}
		w.closeWith("]")
		w.open("imports = [")
		for _, im := range fanoutImports() {
			w.imp(im)
		}
		w.closeWith("]")
		w.open("exports = [")
		for _, im := range fanoutExports() {
			w.export(im, Account)
		}
		for _, im := range operatorFanout() {
			w.export(im, OperatorAccount)
		}
		w.closeWith("]")
		w.close()
	}
	w.open(OperatorAccount)
	w.open("users = [")
	w.user(OperatorUser, s.Passwords[OperatorUser])
	w.closeWith("]")
	w.open("imports = [")
	for _, im := range operatorImports() {
		w.imp(im)
	}
	if s.Level == Hub {
		// The reports the links carry up, live: those reach CUECAST
		// through a service import, which no stream export passes on.
		for _, im := range operatorFanout() {
			w.impFrom(im, FanoutAccount)
		}
	}
	w.closeWith("]")
	w.close()
	for _, ns := range s.Namespaces {
		w.open(q(ServiceAccount(ns)))
		w.open("users = [")
		w.user(ServiceUser(ns), s.Passwords[ServiceUser(ns)])
		w.closeWith("]")
		w.open("imports = [")
		for _, im := range serviceImports(ns) {
			w.imp(im)
		}
		w.closeWith("]")
		w.close()
	}
	w.open(SystemAccount)
	w.open("users = [")
	w.line("{user: %s, password: %s}", q(SystemUser), q(w.hash(s.Passwords[SystemUser])))
	w.closeWith("]")
	if s.Level == Standalone {
		w.list("exports", []string{fmt.Sprintf("{service: %s, accounts: [%s]}", q("$JS.API.>"), q(Account))})
	}
	w.close()
	w.close()
	w.kv("system_account", q(SystemAccount))
	if w.err != nil {
		return "", fmt.Errorf("generate %s config: %w", s.Level, w.err)
	}
	return w.String(), nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = q(s)
	}
	return out
}

// q quotes s as a JSON string, which the nats-server config parser reads
// verbatim.
func q(s string) string { return strconv.Quote(s) }

// confWriter writes the indented nats-server configuration syntax.
type confWriter struct {
	b     strings.Builder
	depth int
	cost  int
	err   error
}

// hash turns a password into the bcrypt hash the server stores instead
// (nats-server compares a "$2a$" password with bcrypt): a configuration,
// which every operator of a host can read, then holds no password a client
// could log in with.
func (w *confWriter) hash(password string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(password), cmp.Or(w.cost, bcrypt.MinCost))
	if err != nil {
		w.err = errors.Join(w.err, fmt.Errorf("hash password: %w", err))
		return ""
	}
	return string(h)
}

func (w *confWriter) String() string { return w.b.String() }

func (w *confWriter) line(format string, args ...any) {
	w.b.WriteString(strings.Repeat("  ", w.depth))
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

func (w *confWriter) blank()                     { w.b.WriteByte('\n') }
func (w *confWriter) comment(f string, a ...any) { w.line("# "+f, a...) }
func (w *confWriter) kv(k, v string)             { w.line("%s: %s", k, v) }

// open starts a block: "name {" or, when name already ends in an opener
// ("users = [", "{"), that text.
func (w *confWriter) open(name string) {
	if strings.HasSuffix(name, "[") || name == "{" {
		w.line("%s", name)
	} else {
		w.line("%s {", name)
	}
	w.depth++
}

func (w *confWriter) close() { w.closeWith("}") }

func (w *confWriter) closeWith(s string) {
	w.depth--
	w.line("%s", s)
}

func (w *confWriter) list(k string, vs []string) {
	w.line("%s: [%s]", k, strings.Join(vs, ", "))
}

// user writes one user of an accounts block, with its permissions when
// UserPermissions fixes them.
func (w *confWriter) user(u, password string) {
	password = w.hash(password)
	perm, ok := UserPermissions(u)
	if !ok {
		w.line("{user: %s, password: %s}", q(u), q(password))
		return
	}
	w.open("{")
	w.kv("user", q(u))
	w.kv("password", q(password))
	if len(perm.ConnectionTypes) > 0 {
		w.list("allowed_connection_types", quoteAll(perm.ConnectionTypes))
	}
	w.open("permissions")
	w.open("publish")
	if len(perm.Publish) > 0 {
		w.list("allow", quoteAll(perm.Publish))
	}
	if len(perm.PublishDeny) > 0 {
		w.list("deny", quoteAll(perm.PublishDeny))
	}
	w.close()
	w.open("subscribe")
	w.list("allow", quoteAll(perm.Subscribe))
	if len(perm.SubscribeDeny) > 0 {
		w.list("deny", quoteAll(perm.SubscribeDeny))
	}
	w.close()
	w.close()
	w.closeWith("}")
}

// export writes one export of the CUECAST account to account.
func (w *confWriter) export(im serviceImport, account string) {
	switch {
	case im.stream:
		w.line("{stream: %s, accounts: [%s]}", q(im.subject), q(account))
	case im.streamed:
		w.line("{service: %s, accounts: [%s], response_type: stream}", q(im.subject), q(account))
	default:
		w.line("{service: %s, accounts: [%s]}", q(im.subject), q(account))
	}
}

// imp writes one import from the CUECAST account.
func (w *confWriter) imp(im serviceImport) { w.impFrom(im, Account) }

// impFrom writes one import from account.
func (w *confWriter) impFrom(im serviceImport, account string) {
	kind := "service"
	if im.stream {
		kind = "stream"
	}
	if im.to != "" {
		w.line("{%s: {account: %s, subject: %s}, to: %s}", kind, q(account), q(im.subject), q(im.to))
		return
	}
	w.line("{%s: {account: %s, subject: %s}}", kind, q(account), q(im.subject))
}

func (w *confWriter) tls(t *TLS, verify bool) {
	w.open("tls")
	if t.Cert != "" {
		w.kv("cert_file", q(t.Cert))
		w.kv("key_file", q(t.Key))
	}
	if t.CA != "" {
		w.kv("ca_file", q(t.CA))
	}
	if verify {
		w.kv("verify", "true")
	}
	w.close()
}
