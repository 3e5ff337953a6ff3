# The FastAPI task-queue lab. `make` (or `make help`) lists every target.
SHELL := bash
.DEFAULT_GOAL := help
COMPOSE ?= docker compose
UV ?= uv
# A uv.lock that no longer matches pyproject.toml fails loudly (uv sync and uv run).
export UV_LOCKED := 1
# The queues on other brokers than Redis, and those brokers, are compose
# profiles of the broker's name: make up BROKERS=rabbitmq starts them too.
comma := ,
ifneq ($(strip $(BROKERS)),)
export COMPOSE_PROFILES := $(subst $() ,$(comma),$(strip $(BROKERS)))
endif
RUN_ARG = $(if $(run),--run $(run),)
# The experiments' one command line (labctl/, `$(LABCTL) --help`): each target below passes its parameters on.
# $(call options,a b_c): `--a 'VALUE' --b-c 'VALUE'` for each variable given (non-empty); the
# defaults live in labctl and lab/load_params.py. $(call flags,x): `--x` when x is given and not 0.
options = $(foreach p,$(1),$(if $(strip $($(p))),--$(subst _,-,$(p)) '$(strip $($(p)))'))
flags = $(foreach f,$(1),$(if $(filter-out 0,$(strip $($(f)))),--$(subst _,-,$(f))))
LABCTL = COMPOSE="$(COMPOSE)" $(UV) run python -m labctl

.PHONY: help install lint dashboards test test-unit test-integration test-compose test-claims test-swarm mutants up down ps logs limits purge reset clean \
        run-api run-worker run-monitor flower

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# --compile-bytecode: the packages' bytecode is written once, here, so every
# process the lab and its tests start imports compiled modules, even where
# PYTHONDONTWRITEBYTECODE keeps Python from caching them, and pays the compile
# only once (docs/results/2026-11-28-figures-out-of-comments.md: what a start costs).
install: ## install the Python environment (uv sync, from uv.lock)
	$(UV) sync --locked --all-groups --compile-bytecode

lint: ## ruff (lint, format check) and mypy
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy

dashboards: ## regenerate grafana/dashboards/*.json from grafana/generate.py
	$(UV) run python grafana/generate.py

# pytest-xdist workers for make test: each starts its own redis-server and lab
# processes on free ports; most of the suite waits on processes (their leases,
# timeouts and outages), not on the CPU: 3 on a 2-core machine. Tests go out one
# at a time in collection order, the longest first; the modules that share a
# lab's processes each run whole on one worker, so those start once (tests/conftest.py).
TEST_WORKERS ?= 3
XDIST = -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

test: ## unit + integration tests: real Redis, real API and worker processes (no Docker), in parallel
	$(UV) run pytest $(XDIST) tests/unit tests/integration $(args)

test-unit: ## the unit tests only (no process of the lab; seconds)
	$(UV) run pytest $(XDIST) tests/unit $(args)

test-integration: ## the integration tests only (a real redis-server, the API and the workers)
	$(UV) run pytest $(XDIST) tests/integration $(args)

test-compose: ## start the real compose project and test it (needs a Docker engine)
	$(UV) run pytest -v tests/compose $(args)

test-claims: ## make claims for real, scaled down (a few minutes): two authors' benchmarks and the lab's path, every job counted (needs a Docker engine)
	$(UV) run pytest -v tests/claims $(args)

test-swarm: ## the stack on a single-node Swarm of this engine, then the engine as it was (needs a Docker engine in no swarm)
	LAB_SWARM_TEST=1 $(UV) run pytest -v -s tests/swarm $(args)

# suite=compose: the compose suite's faults (tests/mutants_compose.py); jobs=N runs N faults at once.
mutants: ## apply deliberate faults to a copy of the tree, one at a time: the tests must catch each
	$(UV) run python -m tests.mutants $(if $(suite),--suite $(suite)) $(if $(jobs),--jobs $(jobs)) $(args)

run-api: ## run the API on the host (no Docker), on port 8000
	$(UV) run uvicorn services.api.app:app --host 127.0.0.1 --port $${API_PORT:-8000}

run-worker: ## run one queue's worker on the host: make run-worker queue=arq (any queue of lab/queues.py)
	@test -n "$(queue)" || { echo "usage: make run-worker queue=arq (any queue of lab/queues.py)"; exit 2; }
	$(UV) run python -m workers.$(queue)_queue

run-monitor: ## run the queue monitor (lab_queue_depth) on the host
	$(UV) run python -m services.queue_monitor

flower: ## run Flower on the host against REDIS_URL, on port 5555
	$(UV) run celery -A workers.celery_queue flower --address=127.0.0.1 --port=$${FLOWER_PORT:-5555}

purge: ## empty a queue's backlog, its tasks counted as purged in the ledger: make purge worker=arq|...|all (its workers stop and start again)
	@$(LABCTL) purge --worker '$(worker)'

reset: ## delete the lab's ledger keys: every run, or run=NAME (never FLUSHALL)
	@if $(COMPOSE) ps --status running --services 2>/dev/null | grep -qx api; then \
	  $(COMPOSE) exec -T api python -m lab.ledger reset $(RUN_ARG); \
	else \
	  $(UV) run python -m lab.ledger reset $(RUN_ARG); \
	fi

# ---- Docker Compose ---------------------------------------------------------
# Variables given on the command line (make up WORKER_CPUS=0.5 ARQ_REPLICAS=2)
# are in the environment of every recipe, which is where compose reads them.
LAB_IMAGE ?= task-queue-lab:local
export LAB_IMAGE
# Every service but Grafana, which has no offline stand-in: the compose tests
# start this list (make up services="$(compose-services)").
compose-services = $(shell COMPOSE_PROFILES=$(COMPOSE_PROFILES) $(COMPOSE) config --services 2>/dev/null | grep -vx grafana | sort | tr '\n' ' ')
# Start a subset: make up services="api redis".
services ?=

.PHONY: compose-services grafana-password

# No default passwords: Grafana's admin and the `lab` user of RabbitMQ and of
# PostgreSQL each get a random one written into .env (read by compose, never
# copied into an image) unless one is already set. Letters and digits only: it
# goes into RABBITMQ_URL and POSTGRES_URL.
define ensure-password
if [ -z "$${$(1):-}" ] && ! grep -qs '^$(1)=.' .env; then \
  pw=$$(head -c 24 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-24); \
  touch .env && chmod 600 .env; \
  if [ -s .env ] && [ -n "$$(tail -c 1 .env)" ]; then echo >> .env; fi; \
  printf '$(1)=%s\n' "$$pw" >> .env; \
  echo "$(2), saved in .env: $$pw"; \
fi
endef

# The URLs of what runs, from the ports compose really published.
define print-urls
for row in "Grafana grafana 3000 /" "Prometheus prometheus 9090 /" "Flower flower 5555 /" \
           "SAQ-UI saq-ui 8082 /" "RabbitMQ rabbitmq 15672 /" "API-docs api 8000 /docs"; do \
  set -- $$row; \
  addr=$$($(COMPOSE) port "$$2" "$$3" 2>/dev/null) && [ -n "$$addr" ] && \
    printf '  %-11s http://%s%s\n' "$$1" "$$addr" "$$4"; \
done; true
endef

grafana-password: ## write random Grafana admin, RabbitMQ and PostgreSQL passwords into .env, unless they are set
	@$(call ensure-password,GRAFANA_ADMIN_PASSWORD,Grafana admin password (user admin))
	@$(call ensure-password,RABBITMQ_PASSWORD,RabbitMQ password (user lab))
	@$(call ensure-password,POSTGRES_PASSWORD,PostgreSQL password (user lab))

up: grafana-password ## build and start the stack, recreating only what changed; waits until healthy, prints the URLs
	$(COMPOSE) up -d --build --wait --remove-orphans $(services)
	@# prometheus.yml and the rules are mounted files: a running Prometheus reads them again.
	@$(COMPOSE) kill -s SIGHUP prometheus >/dev/null 2>&1 || true
	@$(print-urls)

down: ## stop and remove the containers and networks (volumes are kept)
	$(COMPOSE) --profile '*' down --remove-orphans

ps: ## list the containers of the stack
	$(COMPOSE) ps

logs: ## follow the logs: make logs [svc=arq]
	$(COMPOSE) logs --follow --tail=100 $(svc)

limits: ## CPU and memory limit of every running container, as the engine enforces them
	@$(LABCTL) limits

clean: ## remove the stack with its volumes, the lab's built images and results/
	$(COMPOSE) --profile '*' down --volumes --remove-orphans --rmi local
	@docker image rm $(LAB_IMAGE) >/dev/null 2>&1 || true  # if compose kept it
	@if [ -d results ]; then find results -mindepth 1 ! -name .gitkeep -delete; fi

compose-services: ## print every compose service but Grafana (for the tests)
	@echo $(compose-services)

# ---- Load runs (Locust in the compose profile `load`) -------------------------------
# make load worker=arq [endpoint=io/simple users=100 spawn=100 iterations=N|duration=60s rate=R run=NAME]
#                      [drain_watch=60 | wait=1]
# make load scenario=upstream variant=async-blocking users=50 iterations=100
# Only the parameters given are passed: the defaults live in lab/load_params.py.
LOAD_PARAMS = worker endpoint users spawn iterations duration rate run scenario variant mode count size \
              locust_workers drain_watch drain_timeout drain_stall
load-args = $(call options,$(LOAD_PARAMS)) $(call flags,wait)
# Where the run records go (the compose tests point it at a temporary directory).
results_dir ?= results

.PHONY: load results report sweep locust-ui locust-ui-down

load: ## drive the lab with Locust and record the run: make load worker=arq|...|all [endpoint= users= iterations=|duration= rate= run= drain_watch=60|wait=1]
	@$(LABCTL) load $(load-args) --results-dir '$(results_dir)'

locust-ui: ## Locust's web UI on 127.0.0.1:8089 against the lab's API, for interactive runs: make locust-ui worker=arq [endpoint=io/simple run=NAME]
	@$(LABCTL) locust-ui --worker '$(worker)' --endpoint '$(endpoint)' --run '$(run)'

locust-ui-down: ## stop Locust's web UI
	@$(COMPOSE) --profile locust-ui rm --stop --force locust-ui

results: ## the newest runs in a few columns, the latest comparison and bench: make results [full=1: every record, every column]
	@$(LABCTL) results $(call flags,full) $(call options,last) --results-dir '$(results_dir)'

report: ## PNG plots of a run from Prometheus, next to its JSON: make report run=NAME
	@$(LABCTL) report --run '$(run)' --results-dir '$(results_dir)'

sweep: grafana-password ## load runs over a matrix of worker limits: make sweep worker=arq cpus="0.2 0.5 1" mems="200M 500M" iterations=N
	@$(LABCTL) sweep --cpus '$(cpus)' --mems '$(mems)' \
	  --services '$(services)' $(load-args) --results-dir '$(results_dir)'

# ---- Every queue under the same limits ----------------------------------------------------
# make compare [workers="arq saq"] [duration=20 | requests=N] [rounds=3 max_rounds=8 target_pct=5 budget_min=40 seed=N
#              warmup_run=1 quick=1 warmup_s=5 drain_watch=10 users=100 endpoint=io/simple spawn= locust_workers=
#              setting=article]
# Under the running stack's limits (make up WORKER_CPUS=.. first to change them); setting=article
# restarts the compose lab under each of the published experiment's two settings, then its own.
COMPARE_PARAMS = duration requests rounds reps max_rounds target_pct budget_min seed warmup_s drain_watch users \
                 endpoint spawn setting locust_workers backlog_wait_s
compare-args = $(call options,$(COMPARE_PARAMS)) $(call flags,quick capacity) $(if $(filter 0,$(strip $(warmup_run))),--no-warmup-run)
.PHONY: compare compare-agree
compare: ## every queue under the same limits and load, in rounds of random order until each RPS interval is narrow; one report: make compare [workers="arq saq" quick=1 rounds=3 max_rounds=8 budget_min=40 seed=N setting=article capacity=1]
	@$(LABCTL) compare --workers '$(workers)' $(compare-args) --results-dir '$(results_dir)'

compare-agree: ## two comparisons of the same queues side by side: medians apart, pairs called both ways: make compare-agree a=compare-<time> b=compare-<time> [within_pct=10]
	@$(LABCTL) compare-agree --a '$(a)' --b '$(b)' $(call options,within_pct) --results-dir '$(results_dir)'

# ---- What the lab costs ----------------------------------------------------------------
.PHONY: bench
bench: ## the lab's API and workers beside bare ones (each library's plain call): make bench [worker=Q|all requests=3000 users=50 rounds=8 drain_s=30 drain_window_s=1 backlog_wait_s=120]
	@$(LABCTL) bench --worker '$(or $(worker),all)' \
	  $(call options,requests users warmup rounds drain_s drain_window_s backlog_wait_s) --results-dir '$(results_dir)'

# ---- The queue authors' own benchmarks ------------------------------------------------
# make claims [quick=1] [scale=1 reps=2 only=saq_simple,rq_doc,... setups=unlimited,limited]
# make claims report=claims-<time>: a recorded run's report written again (nothing runs)
# On a Redis and containers of its own (never the lab's): the lab need not be up, only its image built.
.PHONY: claims
claims: ## the queue authors' published benchmarks run here beside their figures, and each claim decided: make claims [quick=1 scale= reps= only= setups=] [report=claims-<time>]
	@$(LABCTL) claims $(call flags,quick) $(call options,scale reps only setups report) --results-dir '$(results_dir)'

# ---- Fault experiments ----------------------------------------------------------------
.PHONY: chaos
chaos: ## a load run with a fault injected: make chaos worker=arq fault=kill-worker|stop-worker|restart-redis|restart-broker|oom|kill-node [node=N at=3 hold=5 drain_watch=60|wait=1]
	@$(LABCTL) chaos --fault '$(fault)' $(call options,at hold node) $(load-args) --results-dir '$(results_dir)'

# ---- Docker Swarm (docs/swarm.md) ------------------------------------------------------
.PHONY: stack-up stack-down scale
stack-up: grafana-password ## deploy the lab as a stack to the Swarm the Docker CLI points at: make stack-up [services="api redis ..."]
	@$(LABCTL) stack-up --services '$(services)'

stack-down: ## remove the stack and its port forwarder (the swarm and the volumes stay)
	@$(LABCTL) stack-down

# ---- A cluster of engines on this machine (docs/swarm.md, "A cluster on one machine") ----
# The Swarm test bed: Docker engines in containers, a registry, the lab deployed
# with make stack-up pointed at the cluster's manager. Then, in a shell:
#   eval "$(make -s cluster-env)"     # DOCKER_HOST, LAB_IMAGE, STACK_PUBLISH_IP
#   make load worker=celery           # ... every target drives the lab on the cluster
.PHONY: cluster-up cluster-down cluster-env test-cluster
cluster-up: grafana-password ## a Swarm of Docker engines in containers on this machine, a registry, and the lab on it: make cluster-up [nodes=3 services="..."]
	@$(LABCTL) cluster-up --nodes '$(or $(nodes),3)'
	@eval "$$($(LABCTL) cluster-env)" && $(MAKE) --no-print-directory stack-up services='$(or $(services),$(compose-services))'

cluster-down: ## remove the cluster (its nodes, swarm, registry and volumes); this machine's engine as it was
	@$(LABCTL) cluster-down

cluster-env: ## print the exports that point the Docker CLI and make at the cluster (eval them in a shell)
	@$(LABCTL) cluster-env

test-cluster: ## a three-node cluster, a mixed load with a worker node killed, then everything torn down (needs a Docker engine)
	LAB_CLUSTER_TEST=1 $(UV) run pytest -v -s tests/cluster $(args)

# ---- Capacity (the open model) ----------------------------------------------------------
# make capacity worker=arq|...|all [max_wait=5s step=30s start=5 precision=10 max_rate= reps=1 check=1 check_s=60s
#                                   seed=N target_pct= max_reps=6 endpoint= users= locust_workers=]
CAPACITY_PARAMS = max_wait step start precision max_rate reps check_s seed target_pct max_reps
.PHONY: capacity
capacity: ## the highest task rate each queue sustains under the limits in force (open-model steps, then bisection): make capacity worker=arq|all [max_wait=5s step=30s reps=1 target_pct=10 check=1]
	@$(LABCTL) capacity $(call options,$(CAPACITY_PARAMS)) $(call flags,check) $(load-args) --results-dir '$(results_dir)'

# ---- Scaling ----------------------------------------------------------------------------
scale: ## the same load at each replica count of a queue's workers (or node count, on a Swarm), reps times in random orders: make scale worker=Q replicas="1 2 4 8"|nodes="1 2 3" [reps=3 seed=N per_node=1 requests=N users= endpoint=]
	@$(LABCTL) scale --replicas '$(or $(replicas),1 2 4 8)' $(call options,nodes per_node reps seed) \
	  $(load-args) $(if $(requests),--iterations '$(requests)') --results-dir '$(results_dir)'
