package priority

import (
	"context"
	"go/build"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	leveev2 "github.com/leveehq/levee/proto/leveev2"
)

// arrive sends c as a client would and reads it as the server does.
func arrive(c Class) Class {
	out := Outgoing(context.Background(), c)
	md, _ := metadata.FromOutgoingContext(out)
	return FromIncoming(metadata.NewIncomingContext(context.Background(), md))
}

func TestTravelsThroughMetadata(t *testing.T) {
	for _, c := range Classes {
		if got := arrive(c); got != c {
			t.Fatalf("%v arrived as %v", c, got)
		}
	}
	if got := arrive(Class(7)); got != Default {
		t.Fatalf("an unknown class arrived as %v, want default", got)
	}
	if got := FromIncoming(context.Background()); got != Default {
		t.Fatalf("no metadata = %v, want default", got)
	}
	for _, v := range []string{"", "CRITICAL", "urgent", "critical "} {
		in := metadata.NewIncomingContext(context.Background(), metadata.Pairs(Key, v))
		if got := FromIncoming(in); got != Default {
			t.Fatalf("metadata %q = %v, want default", v, got)
		}
	}
}

func TestOrderIndexAndLabels(t *testing.T) {
	if !(Sheddable < Default && Default < Critical) {
		t.Fatal("classes are not ordered sheddable < default < critical")
	}
	var zero Class
	if zero != Sheddable {
		t.Fatal("the zero class is favoured over sheddable")
	}
	for i, c := range Classes {
		if c.Index() != i || int(c) != i || !c.Valid() {
			t.Fatalf("%#v: Index %d, Valid %v", c, c.Index(), c.Valid())
		}
		if p, ok := Parse(c.String()); !ok || p != c {
			t.Fatalf("Parse(%q) = %v, %v", c.String(), p, ok)
		}
	}
	if Sheddable.String() != "sheddable" || Default.String() != "default" || Critical.String() != "critical" {
		t.Fatal("labels")
	}
	for _, c := range []Class{NumClasses, 9, 255} {
		if c.Valid() || c.Index() != Default.Index() || c.String() != "default" || c.Proto() != leveev2.Criticality_CRITICALITY_DEFAULT {
			t.Fatalf("%#v is not treated as default", c)
		}
	}
	if _, ok := Parse("unknown"); ok {
		t.Fatal("Parse accepted an unknown value")
	}
}

func TestProtoConversion(t *testing.T) {
	for _, c := range Classes {
		p := c.Proto()
		if back, ok := FromProto(p); !ok || back != c {
			t.Fatalf("%v -> %v -> %v, %v", c, p, back, ok)
		}
	}
	if c := Critical.Proto(); c != leveev2.Criticality_CRITICALITY_CRITICAL {
		t.Fatalf("Critical.Proto() = %v", c)
	}
	for _, p := range []leveev2.Criticality{leveev2.Criticality_CRITICALITY_UNSPECIFIED, 99} {
		if c, ok := FromProto(p); ok || c != Default {
			t.Fatalf("FromProto(%v) = %v, %v, want default, false", p, c, ok)
		}
	}
}

// TestLeafPackage keeps the transport from depending on any tier or on the
// battle shedder: only the generated protobuf types are allowed.
func TestLeafPackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/leveehq/levee/") && imp != "github.com/leveehq/levee/proto/leveev2" {
			t.Errorf("priority imports %s", imp)
		}
	}
}

func BenchmarkIndex(b *testing.B) {
	cs := [...]Class{Sheddable, Default, Critical, 5}
	n := 0
	for i := 0; b.Loop(); i++ {
		n += cs[i&3].Index()
	}
	_ = n
}
