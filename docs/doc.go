// Package docs holds Levee's manual (the pages in this directory; the
// README is the front page). It has no code: its test, docs_test.go, reads
// README.md and every docs/*.md and checks that each command they name
// still exists — every `make` target in its Makefile, every scripts/ path
// and linked file (and the heading a link points at), every `loadtest`
// subcommand, and every flag given to a Levee binary — so that `make test`
// fails when a rename leaves the manual behind.
package docs
