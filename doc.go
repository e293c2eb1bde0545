// Package cuecast holds the vocabulary shared by every part of the cuecast
// pipeline: config paths, versions, pointers, reports, cohorts and the sentinel
// errors. It imports nothing of ours, so the client library that services embed
// can depend on it without pulling in the compiler, Git or the NATS server.
//
// The pipeline: engineers change CUE configs by pull request; the compiler
// (package compiler) turns each config into canonical JSON; the tailer (package
// tailer) turns each commit on main into numbered versions; the distributor
// (package distributor) publishes them over NATS JetStream and moves cohort
// pointers; services embed package client to receive, verify and apply them.
package cuecast
