# Levee. `make demo` replays a scaled launch day on a local cluster; `make test` runs the tests.
SHELL := /bin/bash
GO ?= go
MODULE := github.com/leveehq/levee
BIN := bin
TOOLS := $(CURDIR)/.tools
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
# make k8s-test: Kubernetes and kwok are pinned in tools/k8s/go.mod
# (scripts/k8s-tools-pin.sh rewrites it); the CRDs come from these modules.
PROMETHEUS_OPERATOR_VERSION := v0.85.0
KEDA_VERSION := v2.21.0
# cert-manager's Certificate and Issuer CRDs (k8s/overlays/tls), from its
# Go module, the same version as tools/deploycheck decodes them with.
CERT_MANAGER_VERSION := v1.21.2
K8S_TOOLS := $(addprefix $(TOOLS)/,kube-apiserver kube-controller-manager kube-scheduler kubectl kwok etcd)
# The custom metrics API for k8s-test's autoscaling loop (tools/metrics-adapter,
# pinned to the same k8s.io/* versions as tools/k8s so the build cache is shared).
METRICS_ADAPTER := $(TOOLS)/levee-metrics-adapter
CMDS := gate logic battle loadtest levee-certs
PROTO_FILES := $(wildcard proto/levee/v2/*.proto)
# The example game arena's own messages (examples/arena/arenapb).
ARENA_PROTO_FILES := $(wildcard examples/arena/proto/arena/v1/*.proto)

.PHONY: craft-test craft-launch all build images certs up up-postgres down compose-test compose-test-postgres drills demo launch-compare store-compare overload hold-memory hold-line test vet fuzz fuzz-seeds bench proto proto-check tools clean rules-test deploy-check k8s-tools k8s-test

all: build

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

# The compose cluster (docker-compose.yml): images FROM scratch built here
# with the classic builder, nothing pulled; .env with random secrets and
# .certs/ (a local CA and each service's certificate: wss at the gate,
# mutual TLS between the tiers) made when missing. up/down work with docker
# compose (v2) or docker-compose (v1). make certs writes .certs/ alone.
images:
	GO=$(GO) ./scripts/compose.sh images

certs:
	GO=$(GO) ./scripts/compose.sh certs

up:
	GO=$(GO) ./scripts/compose.sh up

# The profile postgres alone: PostgreSQL (levee/postgres, built offline from
# this machine's Debian PostgreSQL 15), three logic on it, gate-pg on
# 127.0.0.1:8090. `make up` stays bolt.
up-postgres:
	GO=$(GO) ./scripts/compose.sh up-postgres

down:
	./scripts/compose.sh down

# Build the images, bring the compose cluster up under a project of its own,
# load it through the gate, SIGKILL a battle container in the middle, check
# no reply was lost and it came back; remove everything (CI runs it).
compose-test:
	GO=$(GO) ./scripts/compose-test.sh

# The profile postgres alone (compose-test runs it too): PostgreSQL healthy
# and taking the generated password, then load through three logic on it
# with logic-pg-2 SIGKILLed (COMPOSE_TEST_POSTGRES=0 skips the load).
compose-test-postgres:
	GO=$(GO) ./scripts/compose-test-postgres.sh

# The failure drills (issue 13, scripts/drills.sh): the capacity of the
# compose cluster measured, then each drill of loadtest/scenarios/drills/
# on a compose project of its own at its share of it, the load tool
# killing, pausing, squeezing, cutting and restarting containers, then the
# four on logic on PostgreSQL (issue 23: the compose profile postgres, 3
# logic on one database; one killed, one frozen past its leases, the
# database restarted, a 2->3 scale-out); writes RELIABILITY.md. About 20
# minutes. `scripts/drills.sh NAME...` runs some.
drills:
	GO=$(GO) ./scripts/drills.sh

demo: build
	./scripts/demo.sh

# Before and after, sized to the machine: the cluster's capacity measured,
# then the launch day at 3 x that capacity with protection off, then on,
# side by side (about 7 minutes; see scripts/launch-compare.sh).
launch-compare: build
	LAUNCH_BUILD=0 ./scripts/launch-compare.sh

# Issue 23's figures: logic on bbolt and on a durable throwaway PostgreSQL
# (Debian's binaries), 1 and 3 logic processes, in one session: purchases/s
# and commit p99, CPU per purchase of logic and of PostgreSQL, a SIGKILLed
# logic's shards without an owner, the launch day on both stores (about
# 30 minutes; see scripts/store-compare.sh).
store-compare: build
	STORE_COMPARE_BUILD=0 ./scripts/store-compare.sh

# The issue-3 overload test: loadtest capacity measures C, then the
# overload preset offers 0.8 x C, then 10 x C, with protection on and then
# off (about 2-3 minutes; see scripts/overload.sh).
overload: build
	OVERLOAD_BUILD=0 ./scripts/overload.sh

# The issue-4 memory benchmark: 15,000 players waiting in one gate's line
# against a bare gorilla/websocket server, resident memory per connection.
hold-memory:
	./scripts/hold-memory.sh

# The issue-9 line benchmark: 80,000 players waiting in five gates' lines
# (one loadtest run of the hold-line preset over several worker processes,
# default gate settings), the players dropped, and
# the gates' CPU while the line stands and while it is paced at 100/s
# (about 2-2.5 minutes; see scripts/hold-line.sh).
hold-line:
	./scripts/hold-line.sh

vet:
	$(GO) vet ./...

# The browser test needs chromium; ensure-chromium.sh installs Debian's when
# it is missing, and LEVEE_REQUIRE_BROWSER makes a missing browser a failure;
# likewise ensure-postgres.sh and LEVEE_REQUIRE_POSTGRES for the tests that
# run logic on a throwaway PostgreSQL (internal/pgtest).
# proto-check fails when the committed generated code is stale; fuzz-seeds
# fails when a fuzz target has no seed corpus (go test ./... runs the seeds).
test: vet proto-check fuzz-seeds rules-test deploy-check craft-test
	./scripts/ensure-chromium.sh
	./scripts/ensure-postgres.sh
	LEVEE_REQUIRE_BROWSER=1 LEVEE_REQUIRE_POSTGRES=1 $(GO) test -race -count=1 -timeout 12m ./...

# The second example game, a module of its own (examples/craft): it builds
# and tests from Levee's exported packages alone, offline (the replace in
# its go.mod points at this checkout), including its e2e test of
# exactly-once across a SIGKILL of logic.
craft-test:
	cd examples/craft && GOPROXY=off $(GO) vet ./... && GOPROXY=off $(GO) test -count=1 -timeout 8m ./...

# The craft example's own launch day on loopback: its binary, its cluster,
# its scenario (examples/craft/launch.yaml); exits 0 when its thresholds pass.
craft-launch:
	GO=$(GO) ./examples/craft/launch.sh

# Prometheus rules (deploy/prometheus/rules): promtool checks them, runs
# their unit tests (which alerts fire on which series) and checks the
# compose Prometheus's config that loads them; the PrometheusRule in k8s/
# must carry the same groups (scripts/prometheusrule.sh writes it).
# ensure-promtool.sh installs Debian's prometheus package when promtool is
# missing.
rules-test:
	@./scripts/ensure-promtool.sh >/dev/null
	promtool check rules deploy/prometheus/rules/levee.rules.yml
	promtool test rules deploy/prometheus/rules/levee.rules.test.yml
	promtool check config deploy/prometheus/prometheus.yml
	./scripts/prometheusrule.sh check

# The deployment files checked offline (tools/deploycheck, a module of
# its own so the Kubernetes types and the Prometheus parser stay out of the
# tiers): kubectl kustomize renders k8s/base and every overlay, every object
# is decoded strictly into its API type, selectors, ports, probes, secrets,
# resources and securityContexts are checked, the HPA's metrics are traced
# to the adapter rules, the ScaledObject and the recording rules, and every
# PromQL expression (rules, adapter, KEDA, dashboard) is parsed; and the
# rules of make k8s-test's live checks (tools/deploycheck/live) are tested.
# (Not cmd/k8scheck, which links client-go: make k8s-test vets, tests and
# builds it, so make test does not compile client-go.)
deploy-check:
	cd tools/deploycheck && $(GO) vet . ./live && LEVEE_REQUIRE_KUBECTL=1 $(GO) test -count=1 . ./live

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Run every fuzz target for FUZZTIME each, found with `go test -list` in
# every package, so a new one is never left out (the seeds always run in
# `make test`).
FUZZTIME ?= 20s
fuzz:
	GO=$(GO) ./scripts/fuzz.sh fuzz $(FUZZTIME)

fuzz-seeds:
	GO=$(GO) ./scripts/fuzz.sh seeds

# The manifests in k8s/ on a real control plane, offline (issue 12): etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kwok's fake
# nodes on loopback; the base and every overlay applied with strict
# server-side validation, every pod scheduled and Ready, every Service with
# its endpoints, the claims bound; a gate pod evicted under its PDB (a
# second eviction refused) and a deleted one leaving the endpoints before it
# goes; with --autoscale (scripts/lib/k8s-autoscale.sh) real battle
# processes stand behind the battle pods, Debian's Prometheus and
# levee-metrics-adapter serve the HPA its metrics, and load drives it up
# and, stopped, back down, printing the replica timeline; then broken
# copies (a misspelt field, a Service selecting nothing, an HPA metric
# nothing serves, a PDB of 3, battle's certificate Secret holding logic's
# pair) must fail naming the object. The tls overlay's cert-manager
# Issuers and Certificates are applied against cert-manager's CRDs (no
# cert-manager runs); the certificate Secrets come from levee-certs. The checks are
# Go on client-go (tools/deploycheck/cmd/k8scheck, built by the script);
# the script starts and stops things. See scripts/k8s-test.sh.
k8s-test: $(K8S_TOOLS) $(METRICS_ADAPTER)
	@./scripts/ensure-k8s-test-deps.sh
	cd tools/deploycheck && $(GO) vet ./cmd/k8scheck && $(GO) test -count=1 ./cmd/k8scheck
	K8S_TEST_DRAIN_BREAK=pdb TOOLS=$(TOOLS) GO=$(GO) PROMETHEUS_OPERATOR_VERSION=$(PROMETHEUS_OPERATOR_VERSION) KEDA_VERSION=$(KEDA_VERSION) CERT_MANAGER_VERSION=$(CERT_MANAGER_VERSION) \
	  ./scripts/k8s-test.sh --autoscale --break misspelt,selector,metric,cert

# The control plane's binaries and etcd, from their own module (about 10
# minutes of 2 cores the first time, then from the build cache).
k8s-tools: $(K8S_TOOLS) $(METRICS_ADAPTER)

# The version stamped in as Kubernetes' own build does (hack/lib/version.sh),
# or they report v0.0.0-master.
K8S_VERSION = $(shell sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[^ ]*\).*/\1/p' tools/k8s/go.mod)
K8S_VERSION_PKGS := k8s.io/component-base/version k8s.io/client-go/pkg/version
K8S_LDFLAGS = $(foreach p,$(K8S_VERSION_PKGS),-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitTreeState=clean \
  -X $(p).gitMajor=$(word 1,$(subst ., ,$(subst v,,$(K8S_VERSION)))) -X $(p).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))))
$(K8S_TOOLS) &: tools/k8s/go.mod tools/k8s/go.sum
	cd tools/k8s && CGO_ENABLED=0 GOBIN=$(TOOLS) $(GO) install -trimpath -ldflags '$(K8S_LDFLAGS)' tool
	mv $(TOOLS)/server $(TOOLS)/etcd   # go.etcd.io/etcd/server/v3 installs as "server"
	@touch $(K8S_TOOLS)

$(METRICS_ADAPTER): tools/metrics-adapter/go.mod tools/metrics-adapter/go.sum $(wildcard tools/metrics-adapter/*.go tools/metrics-adapter/adapter/*.go)
	cd tools/metrics-adapter && CGO_ENABLED=0 $(GO) build -trimpath -o $@ .

# protoc comes from Debian's protobuf-compiler; the Go plugins are pinned here.
tools: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc
	@command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# PROTO_OUT is where generated code goes; proto-check points it at a temp dir.
PROTO_OUT ?= .
proto: tools
	PATH=$(TOOLS):$$PATH protoc -I proto \
	  --go_out=$(PROTO_OUT) --go_opt=module=$(MODULE) \
	  --go-grpc_out=$(PROTO_OUT) --go-grpc_opt=module=$(MODULE) \
	  $(PROTO_FILES)
	PATH=$(TOOLS):$$PATH protoc -I examples/arena/proto \
	  --go_out=$(PROTO_OUT) --go_opt=module=$(MODULE) \
	  $(ARENA_PROTO_FILES)

proto-check: tools
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(MAKE) --no-print-directory proto PROTO_OUT=$$tmp >/dev/null && \
	diff -r $$tmp/proto/leveev2 proto/leveev2 && diff -r $$tmp/examples/arena/arenapb examples/arena/arenapb && \
	PATH=$(TOOLS):$$PATH examples/craft/gen.sh $$tmp >/dev/null && diff -r $$tmp/craftpb examples/craft/craftpb && echo "generated code is up to date"

clean:
	rm -rf $(BIN) $(TOOLS)
