package deploycheck

import "strings"

// flagValue returns the value of the Go flag name in args, written as
// -name v, -name=v, --name v or --name=v; the last one wins, as with the
// flag package.
func flagValue(args []string, name string) (string, bool) {
	var val string
	var found bool
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		switch {
		case a == name && i+1 < len(args):
			val, found = args[i+1], true
			i++
		case strings.HasPrefix(a, name+"="):
			val, found = a[len(name)+1:], true
		}
	}
	return val, found
}
