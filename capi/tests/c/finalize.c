/* Finalizes a plan through Ebb's C ABI and prints what a C++ trainer would read: the plan's
 * symbols, the finalized peak and arena, every decision and a check of the arena offsets.
 * Usage: finalize PLAN BINDINGS BUDGET_BYTES DEVICE
 * Run by capi/tests/c_abi.rs, which compares the decisions with `ebb plan --json`'s. */
#include "ebb.h"
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what) {
    const char *e = ebb_last_error();
    fprintf(stderr, "%s: %s\n", what, e ? e : "(no error set)");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s PLAN BINDINGS BUDGET_BYTES DEVICE\n", argv[0]);
        return 2;
    }
    EbbPlan *plan = ebb_plan_load(argv[1]);
    if (!plan) return fail("ebb_plan_load");
    for (size_t i = 0; i < ebb_plan_symbol_count(plan); i++)
        printf("symbol %s\n", ebb_plan_symbol_name(plan, i));
    printf("scheduled_peak %lld\n", (long long)ebb_plan_peak_bytes(plan, argv[2]));

    long long budget = strtoll(argv[3], NULL, 10);
    EbbFinalized *f = ebb_finalize(plan, argv[2], budget, argv[4]);
    if (!f) return fail("ebb_finalize");
    long long peak = ebb_finalized_peak_bytes(f), arena = ebb_finalized_arena_bytes(f);
    printf("peak %lld\narena %lld\n", peak, arena);
    if (budget >= 0 && peak > budget) {
        fprintf(stderr, "peak %lld above the budget %lld\n", peak, budget);
        return 1;
    }
    size_t n = ebb_finalized_decision_count(f);
    printf("decisions %zu\n", n);
    for (size_t i = 0; i < n; i++) {
        EbbDecision d;
        if (!ebb_finalized_decision(f, i, &d)) return fail("ebb_finalized_decision");
        printf("decision %zu %s value=%zu evict_after=%zu back_before=%zu bytes=%lld\n",
               d.candidate, d.kind == EBB_DECISION_KIND_RECOMPUTE ? "recompute" : "swap",
               d.value, d.evict_after, d.back_before, (long long)d.bytes);
    }
    EbbDecision past;
    if (ebb_finalized_decision(f, n, &past)) {
        fprintf(stderr, "decision %zu should be out of range\n", n);
        return 1;
    }
    size_t allocations = ebb_finalized_allocation_count(f);
    for (size_t i = 0; i < allocations; i++) {
        EbbAllocation a;
        if (!ebb_finalized_allocation(f, i, &a)) return fail("ebb_finalized_allocation");
        if (a.offset < 0 || a.offset + a.bytes > arena || a.start > a.end) {
            fprintf(stderr, "allocation %zu [%lld, +%lld) outside the arena\n", i,
                    (long long)a.offset, (long long)a.bytes);
            return 1;
        }
    }
    printf("allocations %zu inside the arena\n", allocations);
    ebb_finalized_free(f);

    /* Errors come back as NULL and a message, never as a crash. */
    EbbFinalized *bad = ebb_finalize(plan, argv[2], 1, argv[4]);
    printf("budget 1: %s\n", bad ? "accepted?" : ebb_last_error());
    bad = ebb_finalize(plan, "Q=3", budget, argv[4]);
    printf("unknown symbol: %s\n", bad ? "accepted?" : ebb_last_error());
    ebb_plan_free(plan);
    if (ebb_plan_load("/nonexistent/plan.json")) return 1;
    printf("missing file: %s\n", ebb_last_error());
    return 0;
}
