// Package natsconf generates the nats-server configuration for each level of
// the cuecast fan-out tree and creates the mirror streams each level serves
// its instances from.
//
// The tree has three levels (docs/SCALING.md):
//
//	hub cluster (domain "hub", the CUECAST stream, R3)
//	  ▶ regional leaf clusters (their own JetStream domain, mirrors)
//	    ▶ node-local leaf servers (their own domain, mirrors)
//
// Generate renders one server's configuration from a Spec: the CUECAST
// account with JetStream, the system account, one account per namespace
// (ServiceAccount) and the users of the isolation model (the distributor
// writes, operators read status and steer rollouts, each namespace's
// services read only their namespace and report only on it). A namespace's
// services live in their own account and reach the CUECAST account only
// through its exports, imported as services (direct get of their mirror,
// their reports) and as a stream (their updates): a service import rewrites
// reply subjects, so no request of theirs, whatever its reply subject, can
// make JetStream store or deliver an answer in the CUECAST account. The
// operator lives in an account of its own (OperatorAccount) the same way,
// importing the direct gets of what it reads and its two writes
// (OperatorImports), and of the JetStream management API only the report
// stream's information. TLS on every
// listener and remote, and the leafnode remotes that deny the core ccr.>
// subjects in both directions, so each level's instances receive updates only
// from their own level's mirrors. A remote redials only the upstream
// addresses it names (ignore_discovered_servers), never the address the
// level above advertises, which would bypass a proxy or NAT in between.
//
//	conf, err := natsconf.Generate(natsconf.Spec{Level: natsconf.Node, Name: "node-1", ...})
//
// Users log in with passwords (Spec.Passwords; the configuration holds
// their bcrypt hashes) or, in operator mode (Spec.Keys), with .creds files
// from Keys.UserCreds carrying the same permissions; Keys.InstanceCreds
// binds one instance's reports to it. The leaf user a lower level's link
// logs in with may log in only as a leafnode and send up only reports, its
// mirrors' consumer creation and flow control, and answers (LeafAllowed);
// at the hub it is a user of FanoutAccount,
// whose only stream is cuecast.FanoutStream, a mirror of CUECAST that serve
// creates (distributor.Fanout) and the regions mirror, so nothing JetStream answers or
// delivers for a link is stored. The Standalone level is serve's embedded server with
// --secure: the hub's accounts without cluster or leafnodes. EnsureTLS
// makes a private CA and a server's own certificate.
//
// Mirrors creates (or updates) the per-namespace mirror streams CUECAST_<ns>
// in a leaf or node domain: filtered to the namespace, numbered like the
// CUECAST stream (mirrors keep the origin's sequences, which is what pointers
// name), and RePublished onto ccr.<ns>.>. A direct get by sequence names no
// subject, so permissions cannot scope it; scoping it by stream can, which is
// why each namespace reads from its own mirror (client.WithStream).
//
// Authentication timeout: Generate keeps nats-server's default (2 s; with
// TLS, the TLS timeout plus 1 s) on every listener. A login the server had
// no time to judge on a loaded host ("Authentication Timeout") is made
// again by its dialer: a leafnode remote redials at its reconnect interval,
// and cuecast's client connects with retries and reconnects. A longer
// timer would only let every unauthenticated connection hold its slot
// longer; the password hashes' cost (Spec.HashCost) is what keeps each
// login cheap. Tests ask again the same way (natstest.Dial), and count
// only the server's own refusal as one.
//
// Errors: Generate returns an error wrapping ErrInvalidSpec for a spec that
// cannot produce a working server; Mirrors returns ErrInvalidSpec for a bad
// MirrorSpec and NATS errors wrapped with the stream they concern.
package natsconf
