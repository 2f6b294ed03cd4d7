// Package e2e holds Levee's end-to-end tests: the whole cluster in one
// process on loopback ports, and the real binaries as processes.
package e2e
