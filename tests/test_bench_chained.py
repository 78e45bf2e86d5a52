"""bench/incilp_vs_exact.py --copies: the chained zoo graphs behind the README's size table."""

from __future__ import annotations


def test_chained_copies_is_one_dag_of_whole_copies_in_a_row(load_bench):
    from hiertune.solvers.ilp import solve_partition
    from hiertune.solvers.zoo import load_zoo_graph

    bench = load_bench("incilp_vs_exact")
    graph = load_zoo_graph("mobilenet", "keras")
    assert bench.chained_copies(graph, 1) is graph
    chained = bench.chained_copies(graph, 3)
    n = graph.num_nodes
    assert chained.num_nodes == 3 * n and chained.total_param_bytes == 3 * graph.total_param_bytes
    inside = {(e.src, e.dst, e.tensor_bytes) for e in graph.edges}
    for i in range(3):  # every copy keeps the model's own edges
        assert {(e.src - i * n, e.dst - i * n, e.tensor_bytes) for e in chained.edges
                if i * n <= e.src < (i + 1) * n and i * n <= e.dst < (i + 1) * n} == inside
    links = [e for e in chained.edges if e.src // n != e.dst // n]
    assert links and all(e.dst // n == e.src // n + 1 and e.tensor_bytes > 0 for e in links)
    assert chained.longest_path_length() == 3 * graph.longest_path_length()  # copies in a row
    # the exact ILP of the chain splits a copy's worth of parameters per stage at K = 3
    result = solve_partition(chained, 3)
    assert result.optimal and result.objectives[0] <= graph.total_param_bytes
