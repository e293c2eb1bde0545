// Package kubernetes holds the tests of cuecast's Kubernetes manifests (the
// YAML beside this file): every object decodes strictly into the Kubernetes
// API's own Go types, and every cuecast command line in them is one that
// cuecast accepts. It is its own module so that the Kubernetes API types never
// reach the go.sum of a service that imports cuecast's client.
package kubernetes
