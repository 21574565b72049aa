/* Runs a training step through Ebb's C ABI on two executors and compares their outputs.
 *
 * usage: step PLAN BINDINGS INPUTS.bin
 * INPUTS.bin: a uint64 count, then per input: uint64 name length, the dtype name, uint64
 * ndim, ndim int64 extents, uint64 byte count, the bytes (native order, row-major).
 *
 * Prints: the status of picking unknown, `cuda` and `simt` executors (with the messages), the
 * number of outputs, whether every output of `simt` equals `cpu`'s byte for byte, the
 * plan atlas prepared at BINDINGS (then at a bad sample), and a runtime under `95%` of each
 * shape's program-order peak: its budget in bytes at BINDINGS, its outputs against `cpu`'s,
 * its atlas, and the error of a budget that does not parse. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebb.h"

static void *read_exact(FILE *f, size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL || fread(p, 1, n, f) != n) {
        fprintf(stderr, "short read\n");
        exit(2);
    }
    return p;
}

static uint64_t read_u64(FILE *f) {
    uint64_t v;
    void *p = read_exact(f, sizeof v);
    memcpy(&v, p, sizeof v);
    free(p);
    return v;
}

static size_t dtype_size(const char *name) {
    if (!strcmp(name, "float64") || !strcmp(name, "int64") || !strcmp(name, "uint64")) return 8;
    if (!strcmp(name, "float32") || !strcmp(name, "int32") || !strcmp(name, "uint32")) return 4;
    if (!strcmp(name, "float16") || !strcmp(name, "bfloat16") || !strcmp(name, "int16")) return 2;
    return 1;
}

static size_t tensor_bytes(const EbbTensor *t) {
    size_t n = dtype_size(t->dtype);
    for (size_t d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

/* How many outputs of `a` equal `b`'s byte for byte (host memory, same dtype and size). */
static size_t equal_outputs(const EbbStep *a, const EbbStep *b) {
    size_t equal = 0;
    for (size_t i = 0; i < ebb_step_output_count(a); i++) {
        EbbTensor x, y;
        if (!ebb_step_output(a, i, &x) || !ebb_step_output(b, i, &y)) return 0;
        size_t nx = tensor_bytes(&x);
        if (x.memory == EBB_MEMORY_HOST && y.memory == EBB_MEMORY_HOST && !strcmp(x.dtype, y.dtype) &&
            nx == tensor_bytes(&y) && (nx == 0 || !memcmp(x.data, y.data, nx)))
            equal++;
    }
    return equal;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PLAN BINDINGS INPUTS.bin\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[3], "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", argv[3]);
        return 2;
    }
    size_t n = (size_t)read_u64(f);
    EbbTensor *inputs = calloc(n ? n : 1, sizeof *inputs);
    for (size_t i = 0; i < n; i++) {
        size_t len = (size_t)read_u64(f);
        char *name = calloc(len + 1, 1);
        void *p = read_exact(f, len);
        memcpy(name, p, len);
        free(p);
        inputs[i].dtype = name;
        inputs[i].ndim = (size_t)read_u64(f);
        inputs[i].shape = read_exact(f, inputs[i].ndim * sizeof(int64_t));
        inputs[i].data = read_exact(f, (size_t)read_u64(f));
        inputs[i].memory = EBB_MEMORY_HOST;
    }
    fclose(f);

    EbbPlan *plan = ebb_plan_load(argv[1]);
    if (plan == NULL) {
        fprintf(stderr, "load: %s\n", ebb_last_error());
        return 1;
    }
    EbbRuntime *cpu = ebb_runtime_new(plan, -1, NULL);
    EbbRuntime *simt = ebb_runtime_new(plan, -1, NULL);
    if (cpu == NULL || simt == NULL) {
        fprintf(stderr, "runtime: %s\n", ebb_last_error());
        return 1;
    }
    EbbStatus s = ebb_runtime_set_executor(simt, "tpu");
    printf("executor tpu: %d %s\n", (int)s, ebb_last_error());
    s = ebb_runtime_set_executor(simt, "cuda");
    printf("executor cuda: %d %s\n", (int)s, s == EBB_STATUS_OK ? "" : ebb_last_error());
    s = ebb_runtime_set_executor(simt, "simt");
    printf("executor simt: %d\n", (int)s);
    if (s != EBB_STATUS_OK) return 1;

    EbbStep *a = ebb_runtime_step(cpu, argv[2], inputs, n, false);
    EbbStep *b = ebb_runtime_step(simt, argv[2], inputs, n, false);
    if (a == NULL || b == NULL) {
        fprintf(stderr, "step: %s\n", ebb_last_error());
        return 1;
    }
    printf("outputs %zu %zu\n", ebb_step_output_count(a), ebb_step_output_count(b));
    printf("equal %zu\n", equal_outputs(a, b));
    char *report = ebb_step_report_json(b);
    printf("report %s\n", report != NULL && strstr(report, "\"simt\"") != NULL ? "simt" : "?");
    ebb_string_free(report);
    if (ebb_runtime_step(cpu, "B=-3", inputs, n, false) == NULL)
        printf("bad bindings: %s\n", ebb_last_error());
    /* Without a budget no sample needs a decision: an atlas of 0 entries. */
    const char *samples[2] = {argv[2], "B=-3"};
    printf("atlas %" PRId64 "\n", ebb_runtime_prepare_atlas(cpu, samples, 1));
    if (ebb_runtime_prepare_atlas(cpu, samples, 2) == -1)
        printf("bad atlas sample: %s\n", ebb_last_error());

    /* A budget as `ebb run --budget` takes it, resolved at each new shape. */
    EbbRuntime *share = ebb_runtime_new_budget(plan, "95%", NULL);
    EbbStep *c = share == NULL ? NULL : ebb_runtime_step(share, argv[2], inputs, n, false);
    if (c == NULL) {
        fprintf(stderr, "95%%: %s\n", ebb_last_error());
        return 1;
    }
    char *rc = ebb_step_report_json(c);
    const char *field = rc == NULL ? NULL : strstr(rc, "\"budget_bytes\":");
    printf("budget 95%% %lld\n", field == NULL ? -1LL : strtoll(strchr(field, ':') + 1, NULL, 10));
    ebb_string_free(rc);
    printf("equal 95%% %zu\n", equal_outputs(a, c));
    printf("atlas 95%% %" PRId64 "\n", ebb_runtime_prepare_atlas(share, samples, 1));
    if (ebb_runtime_new_budget(plan, "half", NULL) == NULL)
        printf("bad budget: %s\n", ebb_last_error());
    ebb_step_free(c);
    ebb_runtime_free(share);
    ebb_step_free(a);
    ebb_step_free(b);
    ebb_runtime_free(cpu);
    ebb_runtime_free(simt);
    ebb_plan_free(plan);
    for (size_t i = 0; i < n; i++) {
        free((void *)inputs[i].dtype);
        free((void *)inputs[i].shape);
        free((void *)inputs[i].data);
    }
    free(inputs);
    return 0;
}
