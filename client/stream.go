package client

import "fmt"

// WithStream makes the client read (direct get) from the stream name in the
// JetStream domain domain instead of the CUECAST stream of the server it is
// connected to: a mirror near the instance, such as the namespace mirror
// CUECAST_<namespace> that `cuecast nats-config` sets up in every domain of
// the fan-out tree (docs/SCALING.md). An empty domain means the domain of the
// connected server, which for a node-local leaf server is the nearest mirror.
//
// The stream must keep the sequence numbers of CUECAST (a mirror does), since
// pointers name versions by sequence. Updates still arrive on the core ccr.>
// subjects, RePublished by whichever stream the level runs.
func WithStream(domain, name string) Option {
	return func(o *options) error {
		if !streamName(name) {
			return fmt.Errorf("stream %q: want a JetStream stream name", name)
		}
		if domain != "" && !streamName(domain) {
			return fmt.Errorf("domain %q: want a JetStream domain name", domain)
		}
		if domain == "" {
			o.directGet = "$JS.API.DIRECT.GET." + name
		} else {
			o.directGet = "$JS." + domain + ".API.DIRECT.GET." + name
		}
		return nil
	}
}

// streamName reports a usable stream or domain name: no subject
// separators, wildcards or whitespace.
func streamName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		switch {
		case r == '.', r == '*', r == '>', r == '/', r == '\\', r <= ' ', r == 0x7f:
			return false
		}
	}
	return true
}

// NamespaceStream is the mirror a namespace's services read from in every
// leaf and node domain of the fan-out tree, when their credentials come from
// `cuecast nats-config`: WithStream("", NamespaceStream(ns)).
func NamespaceStream(ns string) string { return "CUECAST_" + ns }

// NamespaceInbox is the inbox prefix those credentials allow a namespace's
// services to receive replies on: connect with
// nats.CustomInboxPrefix(NamespaceInbox(ns)).
func NamespaceInbox(ns string) string { return "_INBOX_" + ns }

// InstanceInbox is the inbox prefix of one instance of namespace ns,
// _INBOX_<ns>.<instance>: the only one an instance's own credential
// (`cuecast nats-config user --instance`) allows, and within
// NamespaceInbox, so it works with the namespace's password too. Connect
// with nats.CustomInboxPrefix(InstanceInbox(ns, id)).
func InstanceInbox(ns, instance string) string { return NamespaceInbox(ns) + "." + instance }
