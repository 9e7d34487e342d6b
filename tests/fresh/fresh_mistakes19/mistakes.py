"""Fresh mistakes in the pieces of solutions/*.py, written as a learner would make them, without
reading the course's own lists of typical mistakes; and unusual but correct variants (the entries:
tests/fresh_entries.py). tools/fresh_mistakes.py runs them.

Set 19's learner thinks in explicit Python loops: where the reference uses one tensor operation,
they write a `for` over the batch, the heads, the positions, the rows, the merges or the steps, and
make the slips that loops invite: bounds off by one, accumulators made once and reused or made
with torch.zeros without dtype/device, a loop over the wrong size, writing into a slice of an
input, stacking on the wrong axis, a break or return one indent too deep, a running value (max,
sum, position) not updated or updated too early, .item()/float() inside the loop, a dict changed
while it is iterated; in Triton kernels, tile loops with the wrong end, offsets not advanced, a
mask built once outside the loop, an accumulator not rescaled. Ordinary slips are mixed in. When
this learner is right, the loop versions are the variants."""
from fresh_entries import M, V

MISTAKES = [
    # ---------------- embeddings ----------------
    M("s19_embeddings_lookup_loop_float32_buffer", "embeddings.embed_lookup",
      [("    return table[ids]\n",
        "    flat = ids.reshape(-1)\n"
        "    out = torch.zeros(flat.shape[0], table.shape[1])\n"
        "    for n in range(flat.shape[0]):\n"
        "        out[n] = table[flat[n]]\n"
        "    return out.view(*ids.shape, table.shape[1])\n")],
      "Copies the rows one by one into a buffer made with torch.zeros without dtype= or device=, so a float64 or bf16 (or GPU) table comes back as a float32 CPU tensor.",
      [r"torch\.zeros", r"dtype ?=", r"float32", r"float64|double|bf16|bfloat16", r"device ?="]),
    M("s19_embeddings_lookup_stack_positions_first", "embeddings.embed_lookup",
      [("    return table[ids]\n",
        "    return torch.stack([table[ids[:, t]] for t in range(ids.shape[1])])\n")],
      "Looks up one position at a time over the batch and stacks the (B, D) results on a new first axis, giving (T, B, D) instead of (B, T, D) (and only 2-D ids work).",
      [r"stack", r"dim ?= ?1|wrong (axis|dim)|first axis|axis 0|dim ?= ?0", r"\(T, ?B, ?D\)", r"transpos|swap"]),
    M("s19_embeddings_onehot_loop_float32", "embeddings.embed_onehot",
      [("    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)  # (B, T, V)\n",
        "    one_hot = torch.zeros(*ids.shape, table.shape[0])                     # (B, T, V)\n"
        "    for v in range(table.shape[0]):\n"
        "        one_hot[..., v] = (ids == v).float()\n")],
      "Builds the one-hot vectors in a loop over the vocabulary into a torch.zeros buffer without dtype=, so they are float32 and the product with a float64 or bf16 table fails with a dtype mismatch.",
      [r"torch\.zeros", r"dtype ?=", r"float32|\.float\(\)", r"float64|double|bf16|bfloat16", r"dtype mismatch"]),
    M("s19_embeddings_onehot_loop_misses_last_id", "embeddings.embed_onehot",
      [("    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)  # (B, T, V)\n",
        "    one_hot = torch.zeros(*ids.shape, table.shape[0], dtype=table.dtype, device=table.device)   # (B, T, V)\n"
        "    for v in range(table.shape[0] - 1):\n"
        "        one_hot[..., v] = (ids == v).to(table.dtype)\n")],
      "Loops over range(V - 1), so the id V - 1 never gets its 1 and its tokens come out as zero vectors instead of the last row of the table.",
      [r"V ?- ?1", r"range\(", r"last (id|row|token|entry|column)", r"off[- ]by[- ]one", r"zero (vector|row)"]),
    M("s19_embeddings_positions_loop_inplace", "embeddings.add_positions",
      [("    return tok + position_table[start:start + T]    # (T, D) broadcasts over B\n",
        "    for t in range(T):\n"
        "        tok[:, t] += position_table[start + t]\n"
        "    return tok\n")],
      "Adds each position's vector into tok[:, t] in place inside the loop, overwriting the caller's token embeddings (and failing on a leaf tensor that requires grad).",
      [r"in[- ]place", r"\+=", r"overwrit|mutat|modif(y|ies) (the )?(caller|input)", r"leaf"]),
    M("s19_embeddings_positions_loop_pos_not_advanced", "embeddings.add_positions",
      [("    return tok + position_table[start:start + T]    # (T, D) broadcasts over B\n",
        "    pos = start\n"
        "    out = []\n"
        "    for t in range(T):\n"
        "        out.append(tok[:, t] + position_table[pos])\n"
        "    return torch.stack(out, dim=1)\n")],
      "Keeps a running position pos = start but never increments it in the loop, so every token gets the position vector of `start` instead of start + t.",
      [r"pos(ition)? ?\+= ?1", r"never (increment|advanc|updat)\w*|not (increment|advanc|updat)\w*", r"same position", r"start ?\+ ?t\b"]),
    M("s19_embeddings_cosine_loop_dot_not_accumulated", "embeddings.cosine_similarity",
      [("    dot = (u * v).sum(-1)\n",
        "    dot = 0.0\n"
        "    for d in range(u.shape[-1]):\n"
        "        dot = u[..., d] * v[..., d]\n")],
      "Assigns dot = u[..., d] * v[..., d] inside the loop instead of adding to it, so only the last feature's product is kept rather than the dot product over all D features.",
      [r"\+=", r"accumulat|instead of adding|add(ing)? to it", r"last (feature|component|dimension|element|coordinate)", r"overwrit|replac|reset"]),
    M("s19_embeddings_cosine_item_norms", "embeddings.cosine_similarity",
      [("    return dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)\n",
        "    return dot / max(u.norm().item() * v.norm().item(), eps)\n")],
      "Takes the norms with .norm().item(): over the whole tensor rather than per vector (wrong values for a batch of vectors), and as Python numbers, so no gradient flows through the denominator.",
      [r"\.item\(\)", r"gradient|grad\b|detach", r"dim ?= ?-1|per (vector|row)", r"whole (tensor|table|batch)"]),
    M("s19_embeddings_nearest_loop_no_exclusion", "embeddings.nearest_tokens",
      [("    return torch.topk(scores, k).indices              # (k,), the largest score first\n",
        "    ids = []\n"
        "    for _ in range(k):\n"
        "        ids.append(scores.argmax())\n"
        "    return torch.stack(ids)\n")],
      "Takes the argmax k times without removing (setting to -inf) the row already chosen, so it returns the single best id k times.",
      [r"same (id|index|row)", r"-inf|exclud|remov|mask", r"argmax", r"k times|repeat|duplicat"]),
    M("s19_embeddings_nearest_loop_range_k_minus_1", "embeddings.nearest_tokens",
      [("    return torch.topk(scores, k).indices              # (k,), the largest score first\n",
        "    scores = scores.clone()\n"
        "    ids = []\n"
        "    for _ in range(k - 1):\n"
        "        best = scores.argmax()\n"
        "        ids.append(best)\n"
        "        scores[best] = float(\"-inf\")\n"
        "    return torch.stack(ids)\n")],
      "Loops over range(k - 1), so it returns only k - 1 ids (and fails for k = 1).",
      [r"k ?- ?1", r"range\(k", r"off[- ]by[- ]one", r"one (id|index) (short|too few|missing)|too few"]),
    M("s19_embeddings_forward_loop_batch_overwritten", "embeddings.Embeddings",
      [("        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)\n",
        "        for b in range(ids.shape[0]):\n"
        "            x = add_positions(embed_lookup(self.token_table, ids[b:b + 1]), self.position_table, start)\n")],
      "Loops over the batch but reassigns x each time instead of collecting the results, so only the last sequence's embeddings come back, (1, T, D) instead of (B, T, D).",
      [r"last (sequence|row|batch)", r"overwrit|reassign|replac", r"\(1, ?T, ?D\)", r"collect|append|stack|cat"]),
    M("s19_embeddings_forward_loop_range_start_T", "embeddings.Embeddings",
      [("        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)\n",
        "        tok = embed_lookup(self.token_table, ids)\n"
        "        x = torch.stack([tok[:, t] + self.position_table[t] for t in range(start, ids.shape[1])], dim=1)\n")],
      "Loops t over range(start, T) and adds position_table[t] instead of looping over range(T) with position start + t: with a cache (start > 0) it drops tokens and gives the wrong positions.",
      [r"range\(start", r"start ?\+ ?t\b", r"cache|start ?> ?0", r"drop|fewer|missing|shorter"]),

    # ---------------- attention ----------------
    M("s19_attention_average_past_slice_excludes_self", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)\n",
        "    return torch.stack([x[..., :i, :].mean(dim=-2) for i in range(T)], dim=-2)       # (..., T, D)\n")],
      "Slices x[..., :i, :] instead of :i + 1, so each position averages only the positions before it, not itself: position 0 is the mean of nothing (NaN) and the rest are shifted.",
      [r":i\b|:i\]|:i,|i ?\+ ?1", r"itself|own position|include (the )?(current|position i)", r"nan|empty", r"off[- ]by[- ]one"]),
    M("s19_attention_average_past_float32_running_sum", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)\n",
        "    acc = torch.zeros(x.shape[:-2] + x.shape[-1:])\n"
        "    outs = []\n"
        "    for i in range(T):\n"
        "        acc += x[..., i, :]\n"
        "        outs.append(acc / (i + 1))\n"
        "    return torch.stack(outs, dim=-2)                   # (..., T, D)\n")],
      "Keeps the running sum in a torch.zeros buffer made without dtype=/device=, so for float64 or bf16 input the averages come back as float32 (and on the CPU).",
      [r"torch\.zeros", r"dtype ?=", r"float32", r"float64|double|bf16|bfloat16", r"device ?="]),
    M("s19_attention_average_past_aliased_running_sum", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)\n",
        "    acc = torch.zeros_like(x[..., 0, :])\n"
        "    outs = []\n"
        "    for i in range(T):\n"
        "        acc += x[..., i, :]\n"
        "        outs.append(acc)\n"
        "    counts = torch.arange(1, T + 1, dtype=x.dtype, device=x.device)[:, None]\n"
        "    return torch.stack(outs, dim=-2) / counts          # (..., T, D)\n")],
      "Appends the running-sum tensor itself, which the in-place += keeps changing, so every stacked row is the final total over all T positions (divided by i + 1) instead of the sum up to i.",
      [r"alias|same (tensor|object)", r"in[- ]place", r"clone|copy", r"final (sum|total)|total over all"]),
    M("s19_attention_avg_weights_loop_no_diagonal", "attention.causal_average_weights",
      [("    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones\n"
        "    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count\n",
        "    w = torch.zeros(T, T)\n"
        "    for i in range(T):\n"
        "        w[i, :i] = 1.0 / (i + 1)\n"
        "    return w\n")],
      "Fills row i with 1/(i + 1) only in columns :i, leaving out the diagonal, so each row sums to i/(i + 1) (row 0 is all zero) instead of 1.",
      [r"diagonal", r":i\b|:i\]|i ?\+ ?1", r"sum(s)? to 1|row sums", r"off[- ]by[- ]one"]),
    M("s19_attention_avg_weights_loop_skips_row0", "attention.causal_average_weights",
      [("    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones\n"
        "    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count\n",
        "    w = torch.zeros(T, T)\n"
        "    for i in range(1, T):\n"
        "        w[i, :i + 1] = 1.0 / (i + 1)\n"
        "    return w\n")],
      "Starts the row loop at range(1, T), so row 0 stays all zero instead of holding a single 1 on the diagonal.",
      [r"range\(1", r"row 0|first row", r"all zeros?|stays? zero", r"off[- ]by[- ]one"]),
    M("s19_attention_softmax_weights_loop_masks_diagonal", "attention.causal_softmax_weights",
      [("    future = torch.tril(torch.ones(T, T)) == 0       # (T, T), True above the diagonal\n"
        "    scores = torch.zeros(T, T).masked_fill(future, float(\"-inf\"))\n",
        "    scores = torch.zeros(T, T)\n"
        "    for i in range(T):\n"
        "        scores[i, i:] = float(\"-inf\")\n")],
      "Writes -inf into scores[i, i:] rather than scores[i, i + 1:], masking the diagonal too: row 0 is all -inf (NaN after the softmax) and every other row averages only the earlier positions.",
      [r"diagonal", r"i ?\+ ?1|\[i, ?i:\]", r"nan", r"row 0|first row", r"off[- ]by[- ]one"]),
    M("s19_attention_softmax_weights_loop_over_columns", "attention.causal_softmax_weights",
      [("    return torch.softmax(scores, dim=-1)\n",
        "    weights = torch.zeros(T, T)\n"
        "    for i in range(T):\n"
        "        weights[:, i] = torch.softmax(scores[:, i], dim=0)\n"
        "    return weights\n")],
      "Loops over the columns, taking the softmax of scores[:, i] over the queries instead of each row scores[i] over the keys, so the columns, not the rows, sum to 1.",
      [r"column", r"dim ?= ?0|wrong (axis|dim)", r"rows? (do not|don't|no longer) sum|sum to 1", r"scores\[:, ?i\]"]),
    M("s19_attention_scores_loop_batch_dot_T", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n",
        "    return torch.stack([q[b] @ k[b].T for b in range(q.shape[0])])\n")],
      "Loops over the first axis and uses k[b].T, which only works for 3-D (B, T, K) input: with a head axis .T reverses all the axes of k[b] instead of swapping the last two (the product fails or is wrong), and 2-D (T, K) input gives a vector of dot products.",
      [r"\.T\b", r"transpose\(-2, ?-1\)", r"revers", r"head axis|4-?D|leading (axes|dims)|batch (and|or) head"]),
    M("s19_attention_scores_loop_stack_wrong_axis", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n",
        "    return torch.stack([(q * k[..., j:j + 1, :]).sum(-1) for j in range(k.shape[-2])], dim=-2)\n")],
      "Computes one key's column of scores per loop step but stacks them on dim=-2, giving (..., S, T), the transpose of the (..., T, S) score table.",
      [r"stack", r"dim ?= ?-2|dim ?= ?-1|wrong (axis|dim)", r"\(\.\.\., ?S, ?T\)|\(S, ?T\)", r"transpos"]),
    M("s19_attention_scale_loop_inplace_rows", "attention.scale_scores",
      [("    return scores / math.sqrt(d_head)\n",
        "    for i in range(scores.shape[-2]):\n"
        "        scores[..., i, :] /= math.sqrt(d_head)\n"
        "    return scores\n")],
      "Divides each row of scores in place inside the loop, changing the caller's tensor (and failing on a leaf that requires grad) instead of returning a new one.",
      [r"in[- ]place", r"/=", r"overwrit|mutat|modif(y|ies) (the )?(caller|input)", r"leaf"]),
    M("s19_attention_scale_by_key_count", "attention.scale_scores",
      [("    return scores / math.sqrt(d_head)\n",
        "    return scores / math.sqrt(scores.shape[-1])\n")],
      "Divides by the square root of scores.shape[-1], the number of keys S, instead of the head width d_head.",
      [r"shape\[-1\]", r"number of keys|key count|\bS\b", r"d_head|head (width|dim)", r"wrong (size|scale)"]),
    M("s19_attention_causal_mask_loop_excludes_diagonal", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n"
        "    j = torch.arange(S, device=device)[None, :]   # (1, S)\n"
        "    return j <= i + (S - T)\n",
        "    mask = torch.zeros(T, S, dtype=torch.bool, device=device)\n"
        "    for i in range(T):\n"
        "        mask[i, :i + S - T] = True\n"
        "    return mask\n")],
      "Sets mask[i, :i + S - T] = True, one column short of :i + S - T + 1, so no query may look at its own key (the diagonal is False and, without a cache, the first query sees nothing).",
      [r"diagonal|own (key|position)|itself", r"\+ ?1", r"off[- ]by[- ]one", r"first (query|row)"]),
    M("s19_attention_causal_mask_loop_ignores_cache", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n"
        "    j = torch.arange(S, device=device)[None, :]   # (1, S)\n"
        "    return j <= i + (S - T)\n",
        "    mask = torch.zeros(T, S, dtype=torch.bool, device=device)\n"
        "    for i in range(T):\n"
        "        mask[i, :i + 1] = True\n"
        "    return mask\n")],
      "Allows keys :i + 1 for query i, ignoring the S - T cached keys in front, so with a cache each query is refused the keys between i + 1 and i + S - T that it may see.",
      [r"S ?- ?T", r"cache", r"offset", r"i ?\+ ?S"]),
    M("s19_attention_apply_mask_loop_inplace", "attention.apply_causal_mask",
      [("    allowed = causal_mask(T, S, device=scores.device)\n"
        "    return scores.masked_fill(~allowed, float(\"-inf\"))\n",
        "    for i in range(T):\n"
        "        scores[..., i, i + S - T + 1:] = float(\"-inf\")\n"
        "    return scores\n")],
      "Writes -inf into the caller's scores tensor in place, row by row, instead of returning a masked copy (and fails on a leaf that requires grad).",
      [r"in[- ]place", r"overwrit|mutat|modif(y|ies) (the )?(caller|input)", r"copy|clone|masked_fill\b(?!_)", r"leaf"]),
    M("s19_attention_apply_mask_loop_no_offset", "attention.apply_causal_mask",
      [("    allowed = causal_mask(T, S, device=scores.device)\n"
        "    return scores.masked_fill(~allowed, float(\"-inf\"))\n",
        "    out = scores.clone()\n"
        "    for i in range(T):\n"
        "        out[..., i, i + 1:] = float(\"-inf\")\n"
        "    return out\n")],
      "Masks the keys after column i for query i, ignoring the S - T cached keys, so with a cache (S > T) each query loses the past keys between i + 1 and i + S - T.",
      [r"S ?- ?T", r"cache", r"offset", r"i ?\+ ?1:"]),
    M("s19_attention_softmax_loop_max_over_queries", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n",
        "    m = scores[..., 0, :]\n"
        "    for i in range(1, scores.shape[-2]):\n"
        "        m = torch.maximum(m, scores[..., i, :])\n"
        "    z = scores - m[..., None, :]\n")],
      "Takes the running maximum over the rows (the queries, axis -2) instead of along each row over the keys, so each column is shifted by its own constant and the softmax values change.",
      [r"axis -2|dim ?= ?-2|over (the )?(rows|queries)|column", r"wrong (axis|dim)", r"max(imum)?", r"each row"]),
    M("s19_attention_softmax_loop_inplace_normalise", "attention.softmax",
      [("    return e / e.sum(dim=-1, keepdim=True)\n",
        "    for j in range(e.shape[-1]):\n"
        "        e[..., j] /= e.sum(dim=-1)\n"
        "    return e\n")],
      "Normalises column by column in place, recomputing e.sum(dim=-1) after earlier columns were already divided, so later columns are divided by a shrunken total and the rows no longer sum to 1.",
      [r"in[- ]place|/=", r"recomput|already (divided|normali[sz]ed)|changes? (during|inside)", r"sum to 1|rows? sum", r"shrink|smaller total"]),
    M("s19_attention_softmax_loop_max_skips_last", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n",
        "    m = scores[..., :1]\n"
        "    for j in range(1, scores.shape[-1] - 1):\n"
        "        m = torch.maximum(m, scores[..., j:j + 1])\n"
        "    z = scores - m\n")],
      "The running-max loop runs over range(1, S - 1) and never looks at the last key, so a large score in the last column is not subtracted and exp overflows to inf (NaN weights).",
      [r"last (key|column|score|element)", r"S ?- ?1|shape\[-1\] ?- ?1", r"overflow|inf\b|nan", r"off[- ]by[- ]one"]),
    M("s19_attention_weighted_sum_loop_float32", "attention.weighted_sum",
      [("    return weights @ v\n",
        "    out = torch.zeros(weights.shape[:-1] + v.shape[-1:])\n"
        "    for j in range(v.shape[-2]):\n"
        "        out += weights[..., :, j:j + 1] * v[..., j:j + 1, :]\n"
        "    return out\n")],
      "Accumulates the weighted values in a torch.zeros buffer made without dtype=/device=, so float64 or bf16 inputs give a float32 result.",
      [r"torch\.zeros", r"dtype ?=", r"float32", r"float64|double|bf16|bfloat16", r"device ?="]),
    M("s19_attention_weighted_sum_loop_over_queries", "attention.weighted_sum",
      [("    return weights @ v\n",
        "    out = weights[..., :, :1] * v[..., :1, :]\n"
        "    for j in range(1, weights.shape[-2]):\n"
        "        out = out + weights[..., :, j:j + 1] * v[..., j:j + 1, :]\n"
        "    return out\n")],
      "Loops over range(weights.shape[-2]), the T queries, instead of the S keys, so with a cache (S > T) the values of the last S - T keys are never added.",
      [r"shape\[-2\]", r"\bT\b.*\bS\b|queries instead of (the )?keys|number of (queries|keys)", r"cache|S ?> ?T", r"wrong (bound|size|variable)"]),
    M("s19_attention_attention_return_in_loop", "attention.attention",
      [("    scores = scale_scores(attention_scores(q, k), q.shape[-1])\n"
        "    if causal:\n"
        "        scores = apply_causal_mask(scores)\n"
        "    return weighted_sum(softmax(scores), v)\n",
        "    outs = []\n"
        "    for b in range(q.shape[0]):\n"
        "        scores = scale_scores(attention_scores(q[b], k[b]), q.shape[-1])\n"
        "        if causal:\n"
        "            scores = apply_causal_mask(scores)\n"
        "        outs.append(weighted_sum(softmax(scores), v[b]))\n"
        "        return torch.stack(outs)\n")],
      "The return sits inside the loop over the first axis, so it returns after the first sequence: shape (1, ...) instead of (B, ...).",
      [r"return", r"indent|inside the loop", r"first (sequence|batch|element|iteration)", r"\(1, ?\.\.\.\)|size 1"]),
    M("s19_attention_attention_scale_by_T", "attention.attention",
      [("    scores = scale_scores(attention_scores(q, k), q.shape[-1])\n",
        "    scores = scale_scores(attention_scores(q, k), q.shape[-2])\n")],
      "Scales by the square root of q.shape[-2], the number of queries T, instead of the head width K = q.shape[-1].",
      [r"shape\[-2\]", r"number of queries|\bT\b", r"head (width|dim)|shape\[-1\]|\bK\b", r"scal"]),
    M("s19_attention_head_loop_stack_dim1", "attention.AttentionHead",
      [("        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)\n",
        "        return torch.stack([attention(self.w_q(x[b]), self.w_k(x[b]), self.w_v(x[b]), causal=True)\n"
        "                            for b in range(x.shape[0])], dim=1)\n")],
      "Runs attention one sequence at a time but stacks the results on dim=1, giving (T, B, K) instead of (B, T, K).",
      [r"stack", r"dim ?= ?1|wrong (axis|dim)", r"\(T, ?B, ?K\)", r"transpos|swap"]),

    # ---------------- multihead ----------------
    M("s19_multihead_split_loop_stack_dim2", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    K = HK // n_heads\n"
        "    return torch.stack([x[..., h * K:(h + 1) * K] for h in range(n_heads)], dim=2)\n")],
      "Cuts the heads out in a loop but stacks them on dim=2, giving (B, T, H, K) instead of (B, H, T, K).",
      [r"stack", r"dim ?= ?2|wrong (axis|dim)", r"\(B, ?T, ?H, ?K\)", r"transpose|before the positions"]),
    M("s19_multihead_split_loop_width_H", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    K = HK // n_heads\n"
        "    return torch.stack([x[..., h * n_heads:(h + 1) * n_heads] for h in range(n_heads)], dim=1)\n")],
      "Slices each head with width n_heads instead of K = HK // n_heads, so whenever H != K the heads have the wrong width and take the wrong features.",
      [r"n_heads:\(h|h ?\* ?n_heads", r"width", r"\bK\b|HK ?// ?n_heads|head (width|size)", r"wrong (slice|features|width)"]),
    M("s19_multihead_merge_loop_cat_dim1", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n",
        "    return torch.cat([x[:, h] for h in range(H)], dim=1)\n")],
      "Concatenates the heads' (B, T, K) outputs along dim=1, the positions, giving (B, H·T, K) instead of joining them along the features into (B, T, H·K).",
      [r"cat", r"dim ?= ?1|wrong (axis|dim)", r"\(B, ?H ?[·*]? ?T, ?K\)|positions", r"dim ?= ?-1|last (axis|dim)|features"]),
    M("s19_multihead_merge_loop_over_batch", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n",
        "    return torch.cat([x[:, h] for h in range(B)], dim=-1)\n")],
      "Loops h over range(B), the batch size, instead of range(H), so it joins B heads instead of H: the wrong width (or an index error) whenever B != H.",
      [r"range\(B\)", r"batch (size|axis)", r"range\(H\)|number of heads", r"wrong (variable|bound|loop)"]),
    M("s19_multihead_mha_loop_heads_stack_dim2", "multihead.MultiHeadAttention",
      [("        y = self.attention(q, k, v)                                     # (B, H, T, K)\n",
        "        y = torch.stack([self.attention(q[:, h], k[:, h], v[:, h]) for h in range(H)], dim=2)\n")],
      "Attends head by head but stacks the outputs on dim=2, giving (B, T, H, K), which merge_heads then reads as (B, H, T, K): the output is scrambled (a shape error unless H = T).",
      [r"stack", r"dim ?= ?2|wrong (axis|dim)", r"\(B, ?T, ?H, ?K\)", r"merge_heads"]),
    M("s19_multihead_mha_split_all_by_H", "multihead.MultiHeadAttention",
      [("        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)   # (B, T, H·K), (B, T, G·K) x2\n",
        "        q, k, v = self.qkv(x).split(H * K, dim=-1)                    # (B, T, H·K) x3\n")],
      "Splits the fused projection into equal chunks of H·K, which is right only when G = H: with grouped key/value heads (G < H) the keys and values are cut at the wrong places (or the unpacking fails).",
      [r"G ?\* ?K|G ?< ?H|grouped|kv_heads|key/value heads", r"split\(H ?\* ?K", r"equal (chunks|parts|pieces)", r"boundar|wrong places"]),
    M("s19_multihead_entropy_loop_item", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)\n"
        "    return per_query.mean(dim=(0, 2))                                  # (H,)\n",
        "    H = weights.shape[1]\n"
        "    return torch.tensor([(-torch.xlogy(weights[:, h], weights[:, h]).sum(dim=-1).mean()).item()\n"
        "                         for h in range(H)])\n")],
      "Computes each head's entropy in a loop and collects .item() numbers into torch.tensor, which cuts the gradient and returns float32 for float64 weights.",
      [r"\.item\(\)", r"torch\.tensor", r"gradient|grad\b|detach", r"float32|float64|dtype"]),
    M("s19_multihead_entropy_loop_log_zero", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)\n"
        "    return per_query.mean(dim=(0, 2))                                  # (H,)\n",
        "    ent = torch.zeros_like(weights[..., 0])                             # (B, H, T)\n"
        "    for s in range(weights.shape[-1]):\n"
        "        p = weights[..., s]\n"
        "        ent = ent - p * torch.log(p)\n"
        "    return ent.mean(dim=(0, 2))                                        # (H,)\n")],
      "Adds -p·log p key by key with torch.log, so a key of weight exactly 0 (a masked future key) gives 0·(-inf) = NaN instead of contributing 0.",
      [r"nan", r"0 ?[·*] ?(log ?0|-?inf)|log\(0\)|log of zero", r"xlogy|entr", r"zero weights?|masked"]),

    # ---------------- mlp ----------------
    M("s19_mlp_gelu_tanh_loop_float", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        "    out = [0.5 * float(v) * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (float(v) + 0.044715 * float(v) ** 3)))\n"
        "           for v in x.reshape(-1)]\n"
        "    return torch.tensor(out).view_as(x)\n")],
      "Computes element by element with float() and math.tanh and rebuilds a tensor with torch.tensor, which cuts the gradient and returns float32 whatever x's dtype.",
      [r"float\(", r"math\.tanh", r"gradient|grad\b|detach", r"float32|dtype", r"torch\.tensor"]),
    M("s19_mlp_gelu_tanh_square_not_cube", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        "    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 2)))\n")],
      "Uses x ** 2 instead of x ** 3 in the tanh's argument, so the approximation gives wrong values, most visibly for negative x.",
      [r"x ?\*\* ?2", r"cube|x ?\*\* ?3|x³", r"square"]),
    M("s19_mlp_gelu_erf_loop_inplace", "mlp.gelu_erf",
      [("    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n",
        "    for i in range(x.shape[0]):\n"
        "        x[i] = 0.5 * x[i] * (1.0 + torch.erf(x[i] / math.sqrt(2.0)))\n"
        "    return x\n")],
      "Overwrites x row by row inside the loop and returns it, changing the caller's tensor (and failing on a leaf that requires grad).",
      [r"in[- ]place", r"overwrit|mutat|modif(y|ies) (the )?(caller|input)", r"x\[i\] ?=", r"leaf"]),
    M("s19_mlp_gelu_erf_divide_by_2", "mlp.gelu_erf",
      [("    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n",
        "    return 0.5 * x * (1.0 + torch.erf(x / 2.0))\n")],
      "Divides x by 2 instead of sqrt(2) inside erf, so Phi and the GELU are wrong.",
      [r"sqrt\(2|√2|square root of (2|two)", r"x ?/ ?2", r"erf"]),
    M("s19_mlp_gelu_grad_missing_x", "mlp.gelu_grad",
      [("    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi\n",
        "    return cdf + pdf\n")],
      "Returns Phi(x) + phi(x), dropping the factor x on the density term of the product rule.",
      [r"x ?[·*] ?(pdf|phi)", r"product rule", r"factor (of )?x|missing x|without x", r"cdf ?\+ ?pdf"]),
    M("s19_mlp_gelu_grad_pdf_no_half", "mlp.gelu_grad",
      [("    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)\n",
        "    pdf = torch.exp(-x ** 2) / math.sqrt(2.0 * math.pi)                 # phi(x) = Phi'(x)\n")],
      "Uses exp(-x²) instead of exp(-x²/2) in the normal density, so the slope is wrong away from 0.",
      [r"exp\(-x", r"x ?\*\* ?2 ?/ ?2|-0\.5|half|/ ?2", r"densit|pdf|phi"]),
    M("s19_mlp_forward_loop_last_position_zero", "mlp.MLP",
      [("        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        out = torch.zeros_like(x)\n"
        "        for t in range(x.shape[1] - 1):\n"
        "            out[:, t] = self.proj(self.gelu(self.fc(x[:, t])))\n"
        "        return out\n")],
      "Loops over the positions with range(T - 1), so the last position's output stays zero.",
      [r"T ?- ?1|shape\[1\] ?- ?1", r"last (position|token)", r"zero", r"off[- ]by[- ]one"]),
    M("s19_mlp_forward_gelu_before_fc", "mlp.MLP",
      [("        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        return self.proj(self.fc(self.gelu(x)))\n")],
      "Applies GELU to the input before the first linear layer and nothing between the layers, so the two linear layers collapse into one linear map of GELU(x).",
      [r"gelu\(x\)|before (the )?(fc|first)", r"order", r"between (the )?(two )?(layers|linear)", r"collapse|linear map"]),

    # ---------------- block ----------------
    M("s19_block_layer_norm_loop_unbiased_var", "block.layer_norm",
      [("    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased\n",
        "    var = 0\n"
        "    for d in range(x.shape[-1]):\n"
        "        var = var + (x[..., d:d + 1] - mean) ** 2\n"
        "    var = var / (x.shape[-1] - 1)                              # (..., 1)\n")],
      "Sums the squared deviations in a loop and divides by D - 1 (the unbiased variance) instead of D.",
      [r"D ?- ?1|shape\[-1\] ?- ?1|n ?- ?1", r"unbiased|bessel", r"biased", r"divid\w* by D\b"]),
    M("s19_block_layer_norm_loop_mean_skips_first", "block.layer_norm",
      [("    mean = x.mean(dim=-1, keepdim=True)                        # (..., 1)\n",
        "    total = 0\n"
        "    for d in range(1, x.shape[-1]):\n"
        "        total = total + x[..., d:d + 1]\n"
        "    mean = total / x.shape[-1]                                 # (..., 1)\n")],
      "The loop for the mean runs over range(1, D) and leaves out feature 0, so the mean (and with it the variance and the output) is wrong.",
      [r"range\(1", r"feature 0|first feature|index 0", r"off[- ]by[- ]one", r"mean"]),
    M("s19_block_dropout_one_mask_for_batch", "block.dropout",
      [("    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p\n"
        "    return x * keep / (1 - p)\n",
        "    keep = torch.rand(x.shape[1:], generator=generator, device=x.device) >= p   # one sequence's mask\n"
        "    return torch.stack([x[b] * keep / (1 - p) for b in range(x.shape[0])])\n")],
      "Draws one mask of shape x.shape[1:] before the loop over the batch and reuses it for every sequence, so all rows of the batch drop the same elements (and the draws differ from one per element).",
      [r"same mask|one mask|reus", r"shape\[1:\]", r"every (sequence|row|batch)|across the batch", r"independen"]),
    M("s19_block_dropout_inplace_zero", "block.dropout",
      [("    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p\n"
        "    return x * keep / (1 - p)\n",
        "    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p\n"
        "    x[~keep] = 0.0\n"
        "    x /= 1 - p\n"
        "    return x\n")],
      "Zeroes the dropped elements and rescales x in place, changing the caller's tensor (and failing on a leaf that requires grad) instead of building a new one.",
      [r"in[- ]place", r"overwrit|mutat|modif(y|ies) (the )?(caller|input)", r"/=|x\[~keep\]", r"leaf"]),
    M("s19_block_dropout_no_p_one_case", "block.dropout",
      [("    if p == 1:\n"
        "        return torch.zeros_like(x)                              # 1 / (1 - p) would be 1/0\n", "")],
      "Drops the p == 1 case, so x * keep / (1 - p) divides 0 by 0 and returns NaN everywhere instead of zeros.",
      [r"p ?== ?1|p ?= ?1", r"nan", r"0 ?/ ?0|divi\w* by zero|1 ?- ?p", r"zeros_like|all zeros?"]),
    M("s19_block_loop_residual_from_normalised", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n"
        "        x = x + self.drop(self.mlp(self.ln2(x)))\n"
        "        return x\n",
        "        for norm, sublayer in ((self.ln1, lambda h: self.attn(h, cache)), (self.ln2, self.mlp)):\n"
        "            h = norm(x)\n"
        "            x = h + self.drop(sublayer(h))\n"
        "        return x\n")],
      "Inside the loop over the two sublayers it adds each sublayer's output to the normalised h = norm(x) instead of to the raw stream x, so the residual stream is normalised away at every step.",
      [r"normali[sz]ed (stream|copy|input|h)", r"residual", r"raw (stream|x)", r"h ?\+"]),
    M("s19_block_loop_residual_not_carried", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n"
        "        x = x + self.drop(self.mlp(self.ln2(x)))\n"
        "        return x\n",
        "        out = x\n"
        "        for norm, sublayer in ((self.ln1, lambda h: self.attn(h, cache)), (self.ln2, self.mlp)):\n"
        "            out = x + self.drop(sublayer(norm(x)))\n"
        "        return out\n")],
      "Writes each step's result into out but keeps reading the original x, so the attention's update is thrown away and the MLP reads the block's input instead of x + attention.",
      [r"attention('s)? (update|output|result) (is )?(lost|thrown|discarded|dropped)", r"original x|block's input|stale", r"out ?= ?x ?\+", r"not (carried|updated|passed)"]),
    M("s19_block_postnorm_mlp_stale_input", "block.PostNormBlock",
      [("        x = self.ln1(x + self.drop(self.attn(x, cache)))\n"
        "        x = self.ln2(x + self.drop(self.mlp(x)))\n",
        "        h = self.ln1(x + self.drop(self.attn(x, cache)))\n"
        "        x = self.ln2(x + self.drop(self.mlp(h)))\n")],
      "Keeps the first result in h but adds the MLP's output to the old x (the block's input) instead of to h, so the attention's result reaches the output only through the MLP.",
      [r"old x|block's input|stale|original x", r"residual", r"\bh\b", r"attention('s)? (result|output)"]),

    # ---------------- model ----------------
    M("s19_model_init_loop_one_block_short", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        self.blocks = nn.ModuleList()\n"
        "        for _ in range(cfg.n_layers - 1):\n"
        "            self.blocks.append(Block(cfg))\n")],
      "Appends the blocks in a loop over range(n_layers - 1), building L - 1 blocks instead of L.",
      [r"n_layers ?- ?1|L ?- ?1", r"one (block )?(short|too few|missing)|too few", r"off[- ]by[- ]one", r"range\("]),
    M("s19_model_init_one_block_reused", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        block = Block(cfg)\n"
        "        self.blocks = nn.ModuleList(block for _ in range(cfg.n_layers))\n")],
      "Makes one Block before the loop and puts that same module in the list L times, so all L blocks share one set of weights.",
      [r"same (block|module|object|instance)", r"shar\w* (one set of )?weights|weights? (are )?shared|tied", r"once|outside the loop", r"new Block|fresh"]),
    M("s19_model_forward_first_cache_for_all", "model.ANDREA",
      [("            x = block(x, caches[i] if caches else None)              # (B, T, D)\n",
        "            x = block(x, caches[0] if caches else None)              # (B, T, D)\n")],
      "Passes caches[0] to every block instead of caches[i], so all blocks write their keys and values into the first block's cache and generation with a cache goes wrong.",
      [r"caches\[0\]", r"caches\[i\]", r"first (block's )?cache|same cache", r"every block|all blocks"]),
    M("s19_model_forward_blocks_read_embeddings", "model.ANDREA",
      [("        x = self.embed(ids, start)                                   # (B, T, D)\n"
        "        for i, block in enumerate(self.blocks):\n"
        "            x = block(x, caches[i] if caches else None)              # (B, T, D)\n",
        "        h = self.embed(ids, start)                                   # (B, T, D)\n"
        "        for i, block in enumerate(self.blocks):\n"
        "            x = block(h, caches[i] if caches else None)              # (B, T, D)\n")],
      "Feeds every block the embeddings h instead of the previous block's output, so only the last block's output reaches the head and the blocks are not chained.",
      [r"embedding", r"previous (block|output)|chain", r"block\(h", r"only the last block"]),
    M("s19_model_forward_ln_f_inside_loop", "model.ANDREA",
      [("            x = block(x, caches[i] if caches else None)              # (B, T, D)\n"
        "        x = self.ln_f(x)\n",
        "            x = block(x, caches[i] if caches else None)              # (B, T, D)\n"
        "            x = self.ln_f(x)\n")],
      "The final norm sits one indent too deep, inside the loop, so it is applied after every block instead of once after the last one.",
      [r"ln_f", r"indent|inside the loop", r"every block|each block", r"once"]),
    M("s19_model_count_loop_range_1_L", "model.count_parameters",
      [("    positions = 0 if cfg.position == \"rope\" else T * D         # RoPE turns q and k: no table\n",
        "    positions = 0 if cfg.position == \"rope\" else T * D         # RoPE turns q and k: no table\n"
        "    blocks = 0\n"
        "    for _ in range(1, L):\n"
        "        blocks += block\n"),
       ("                  norms=2 * norm, block=block, blocks=L * block, final_norm=norm,\n",
        "                  norms=2 * norm, block=block, blocks=blocks, final_norm=norm,\n")],
      "Adds the blocks up in a loop over range(1, L), which counts L - 1 blocks, so blocks and total are one block short.",
      [r"range\(1", r"L ?- ?1", r"one block (short|too few|missing)", r"off[- ]by[- ]one"]),
    M("s19_model_count_qkv_all_H", "model.count_parameters",
      [("    qkv_out = (H + 2 * G) * K\n", "    qkv_out = 3 * H * K\n")],
      "Counts the fused projection as 3·H·K outputs, as if there were H key/value heads, so with grouped heads (G < H) the attention count is too large.",
      [r"3 ?[·*] ?H", r"\bG\b|kv_heads|key/value heads|grouped", r"H ?\+ ?2 ?[·*]? ?G", r"too (large|many)"]),
    M("s19_model_sample_kth_of_row0", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)\n",
        "        kth = torch.topk(logits[0], min(top_k, logits.shape[-1])).values[-1]   # row 0's k-th logit\n")],
      "Takes the k-th largest logit of row 0 and uses it as the threshold for every row, so with B > 1 the other rows keep the wrong set of tokens.",
      [r"row 0|first row|logits\[0\]", r"every row|all rows|each row", r"threshold|k-?th", r"per[- ]row"]),
    M("s19_model_kvcache_loop_pos_not_advanced", "model.KVCache",
      [("        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer\n"
        "        self.v[:, :, self.pos:self.pos + T] = v\n",
        "        for t in range(T):\n"
        "            self.k[:, :, self.pos] = k[:, :, t]\n"
        "            self.v[:, :, self.pos] = v[:, :, t]\n")],
      "Writes the T new positions one by one into slot self.pos without moving the slot on inside the loop, so all of them land on the same position and only the last survives.",
      [r"self\.pos ?\+ ?t", r"same (slot|position)", r"only the last", r"not (advanced|incremented|moved)|never (advanced|incremented|moved)"]),
    M("s19_model_kvcache_pos_advanced_before_write", "model.KVCache",
      [("        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer\n"
        "        self.v[:, :, self.pos:self.pos + T] = v\n"
        "        self.pos += T\n",
        "        self.pos += T\n"
        "        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer\n"
        "        self.v[:, :, self.pos:self.pos + T] = v\n")],
      "Advances self.pos before writing, so the new keys and values go T slots too far (or do not fit) and the returned view ends in unwritten zeros.",
      [r"before (writing|the write)", r"pos ?\+= ?T", r"too far|wrong (slot|position)|T slots", r"order"]),

    # ---------------- modern ----------------
    M("s19_modern_rms_loop_sum_not_mean", "modern.rms_norm",
      [("    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)     # one reduction: mean(x²)\n",
        "    ss = 0\n"
        "    for d in range(xw.shape[-1]):\n"
        "        ss = ss + xw[..., d:d + 1] ** 2\n"
        "    y = xw * torch.rsqrt(ss + eps)                                        # (..., D)\n")],
      "Accumulates the squares in a loop but never divides by D, so it divides by the root of the sum of squares (the norm) instead of the root mean square: the output is sqrt(D) times too small.",
      [r"divid\w* by D|/ ?D\b|mean", r"sum of squares", r"sqrt\(D\)|√D", r"norm\b|length"]),
    M("s19_modern_rms_no_cast_back", "modern.rms_norm",
      [("    return (y * weight.to(wide)).to(x.dtype)\n", "    return y * weight.to(wide)\n")],
      "Leaves out the final .to(x.dtype), so a bf16 or fp16 input comes back as float32.",
      [r"\.to\(x\.dtype\)", r"cast back|input'?s dtype|x's dtype", r"bf16|bfloat16|fp16|float16", r"float32"]),
    M("s19_modern_rms_loop_float_scale", "modern.rms_norm",
      [("    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)     # one reduction: mean(x²)\n",
        "    rows = xw.reshape(-1, xw.shape[-1])\n"
        "    y = torch.stack([row / math.sqrt(float(row.pow(2).mean()) + eps) for row in rows]).view_as(xw)\n")],
      "Computes each row's scale with float() and math.sqrt inside the loop, a Python number without gradient, so the gradient misses the part that flows through the root mean square.",
      [r"float\(", r"math\.sqrt", r"gradient|grad\b|detach", r"python (number|float|scalar)"]),
    M("s19_modern_hidden_while_le", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    F_ = multiple_of\n"
        "    while F_ <= 8 * d_model / 3:\n"
        "        F_ += multiple_of\n"
        "    return F_\n")],
      "Steps F up while F <= 8D/3 instead of while F < 8D/3, so when 8D/3 is already a multiple (D = 768 gives 2,048) it returns one step more (2,304).",
      [r"<=", r"\b<\b|strict", r"2,?304|one (step|multiple) (more|too many)", r"exact (multiple)?|already a multiple"]),
    M("s19_modern_hidden_int_floor", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    return multiple_of * int(8 * d_model / 3 / multiple_of)\n")],
      "Rounds 8D/3 down with int() instead of up with math.ceil, so D = 4096 gives 10,752 instead of 11,008.",
      [r"int\(", r"ceil", r"round(s|ing)? (it )?down|floor|truncat", r"10,?752"]),
    M("s19_modern_swiglu_loop_into_gate", "modern.swiglu",
      [("    return F.silu(gate) * up\n",
        "    out = gate\n"
        "    for f in range(gate.shape[-1]):\n"
        "        out[..., f] = F.silu(gate[..., f]) * up[..., f]\n"
        "    return out\n")],
      "Writes the results column by column into out = gate, which is the caller's gate tensor itself, so the input is overwritten in place (and a leaf that requires grad fails).",
      [r"in[- ]place", r"out ?= ?gate|alias|same tensor", r"overwrit|mutat|modif(y|ies) (the )?(caller|input|gate)", r"clone|copy|leaf"]),
    M("s19_modern_swiglu_module_swapped", "modern.SwiGLU",
      [("        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        return self.w_down(self.swiglu(self.w_up(x), self.w_gate(x)))\n")],
      "Passes w_up(x) as the gate and w_gate(x) as the value, swapping the two roles.",
      [r"swap", r"w_up", r"w_gate", r"gate.*value|order of (the )?arguments"]),
    M("s19_modern_swiglu_module_gate_from_first_sequence", "modern.SwiGLU",
      [("        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        gate = self.w_gate(x[0])\n"
        "        return torch.stack([self.w_down(self.swiglu(gate, self.w_up(x[b]))) for b in range(x.shape[0])])\n")],
      "Computes the gate once from x[0] before the loop over the batch and reuses it for every sequence, so with B > 1 every sequence is gated by the first one's gate.",
      [r"x\[0\]", r"first (sequence|row|element)", r"reus|once|outside the loop", r"every sequence|each sequence|whole batch"]),
    M("s19_modern_kv_bytes_loop_keys_only", "modern.kv_cache_bytes",
      [("    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n",
        "    total = 0\n"
        "    for _ in range(cfg.n_layers):\n"
        "        total += batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n"
        "    return total\n")],
      "Adds one tensor per block in the loop, counting the keys but not the values, so the total is half the true cache size.",
      [r"factor (of )?2|\b2 ?\*|twice", r"values?", r"keys? (only|but not)", r"half"]),
    M("s19_modern_kv_bytes_query_heads", "modern.kv_cache_bytes",
      [("    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n",
        "    return 2 * cfg.n_layers * batch * cfg.n_heads * S * cfg.d_head * bytes_per_value\n")],
      "Uses the query head count H (cfg.n_heads) instead of the key/value heads G (cfg.kv_heads), so grouped heads do not shrink the cache.",
      [r"n_heads", r"kv_heads|key/value heads|\bG\b", r"query heads|\bH\b", r"group"]),
    M("s19_modern_rope_freq_loop_exponent_i", "modern.rope_frequencies",
      [("    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K\n",
        "    inv_freq = torch.tensor([theta ** (-i / d_head) for i in range(d_head // 2)], dtype=torch.float32)   # (K/2,)\n")],
      "Builds the frequencies in a loop over the pair index i with exponent -i/K instead of -2i/K, so they fall only half as fast and the last pair still turns quickly.",
      [r"2i|2 ?\* ?i", r"-i ?/ ?(K|d_head)", r"exponent", r"half as fast|too slowly|frequenc"]),
    M("s19_modern_rope_freq_positions_from_1", "modern.rope_frequencies",
      [("    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)              # (T, K/2)\n",
        "    angles = torch.zeros(T, d_head // 2)\n"
        "    for t in range(1, T + 1):\n"
        "        angles[t - 1] = t * inv_freq                                                  # (T, K/2)\n")],
      "Loops the positions over range(1, T + 1), so row t holds the angles of position t + 1: position 0 is turned (its cos is not 1) and every position is shifted by one.",
      [r"range\(1", r"position 0|start(s|ing)? at (0|1)", r"shift\w* by one|off[- ]by[- ]one", r"t ?\+ ?1"]),
    M("s19_modern_rope_apply_loop_adjacent_pairs", "modern.apply_rope",
      [("    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)           # pair (i, i + K/2)\n"
        "    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)\n",
        "    xw = x.to(wide)\n"
        "    out = []\n"
        "    for i in range(half):\n"
        "        a, b = xw[..., 2 * i], xw[..., 2 * i + 1]                     # pair (2i, 2i + 1)\n"
        "        out += [a * c[:, i] - b * s[:, i], a * s[:, i] + b * c[:, i]]\n"
        "    return torch.stack(out, dim=-1).to(x.dtype)\n")],
      "Pairs neighbouring features (2i, 2i + 1), the interleaved GPT-J layout, instead of feature i with i + K/2 (the NeoX / LLaMA halves), so every pair is turned wrongly.",
      [r"interleav|adjacent|neighbou?ring", r"2i|2 ?\* ?i", r"i ?\+ ?K ?/ ?2|halves|half", r"gpt-?j|neox|llama"]),
    M("s19_modern_rope_apply_range_start_T", "modern.apply_rope",
      [("    c, s = cos[start:start + T], sin[start:start + T]                 # (T, K/2): positions start .. start + T - 1\n",
        "    c, s = cos[start:T], sin[start:T]                                 # (T, K/2)\n")],
      "Slices the tables cos[start:T] instead of cos[start:start + T], so with start > 0 it takes T - start rows: a broadcast error, or the wrong positions.",
      [r"start ?: ?T\b|\[start:T\]", r"start ?\+ ?T", r"T ?- ?start|fewer rows", r"start ?> ?0|cache"]),
    M("s19_modern_rope_attention_start_from_heads", "modern.rope_attention",
      [("    start = past_k.shape[-2]                                          # S0: positions already cached\n",
        "    start = past_k.shape[1]                                           # S0\n")],
      "Reads start from past_k.shape[1], the head count, instead of the position axis shape[-2], so the new positions are numbered from H instead of S0.",
      [r"shape\[1\]", r"shape\[-2\]|position axis", r"head (count|axis)|number of heads", r"wrong (axis|position)"]),
    M("s19_modern_rope_attention_cache_after_new", "modern.rope_attention",
      [("    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)\n",
        "    k_all, v_all = torch.cat([k, past_k], dim=-2), torch.cat([v, past_v], dim=-2)   # (B, H, S0 + T, K)\n")],
      "Puts the new keys and values before the cached ones, so the causal mask lines the queries up with the wrong keys and the returned cache is out of order.",
      [r"order", r"cat\(\[k, ?past_k\]|before the (cached|past)", r"append", r"past_k"]),
    M("s19_modern_rope_attention_values_rotated", "modern.rope_attention",
      [("    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)\n",
        "    q, k, v = (apply_rope(t, cos, sin, start) for t in (q, k, v))\n")],
      "Rotates the values as well as q and k (looping apply_rope over all three), so the outputs and the returned values are turned by their positions.",
      [r"values?", r"rotat|turn", r"only q and k|not the values|never turned", r"apply_rope\(v"]),

    # ---------------- kernels ----------------
    M("s19_kernels_gelu_mask_le", "kernels.gelu_kernel",
      [("    mask = offs < n_elements                                 # the ragged tail of the last block\n",
        "    mask = offs <= n_elements                                # the ragged tail of the last block\n")],
      "Builds the mask with <= n_elements, so the lane at index n_elements is loaded and stored too: the kernel writes one element past the end of y.",
      [r"<=", r"past the end|out of bounds|one (element )?too (many|far)", r"off[- ]by[- ]one", r"mask"]),
    M("s19_kernels_gelu_offsets_not_advanced", "kernels.gelu_kernel",
      [("    offs = pid * BLOCK + tl.arange(0, BLOCK)                 # this program's element indices\n",
        "    offs = pid + tl.arange(0, BLOCK)                         # this program's element indices\n")],
      "Starts program pid at element pid instead of pid * BLOCK, so the blocks overlap and, with more than one block, most elements after the first block are never computed.",
      [r"pid ?\* ?BLOCK", r"overlap", r"never (computed|written|stored)|not (computed|written)", r"offset"]),
    M("s19_kernels_ln_divide_by_block", "kernels.layer_norm_kernel",
      [("    mean = tl.sum(x, axis=0) / D\n", "    mean = tl.sum(x, axis=0) / BLOCK_D\n")],
      "Divides the sum by BLOCK_D, the padded block width, instead of D, so the mean is too small whenever D is not a power of two.",
      [r"BLOCK_D", r"divid\w* by D\b|/ ?D\b|real width", r"padd", r"power of (2|two)"]),
    M("s19_kernels_softmax_pad_zero", "kernels.softmax_kernel",
      [("    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float(\"-inf\")).to(tl.float32)\n",
        "    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)\n")],
      "Loads the padding lanes as 0.0 instead of -inf, so when n_cols is not a power of two each adds exp(0 - max) to the sum (and one can win the max when every score is negative).",
      [r"other ?= ?0", r"-inf|minus infinity", r"padd", r"sum|denominator"]),
    M("s19_kernels_softmax_store_x_stride", "kernels.softmax_kernel",
      [("    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)\n",
        "    tl.store(y_ptr + row * x_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)\n")],
      "Stores row r at y_ptr + r·x_row_stride, so when x's rows are a slice of a wider matrix the output rows land in the wrong places (and past the end).",
      [r"x_row_stride", r"y_row_stride", r"stride", r"slice|wider|strided"]),
    M("s19_kernels_flash_acc_not_rescaled", "kernels.flash_attention_kernel",
      [("        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=\"ieee\")\n",
        "        acc = acc + tl.dot(p, v, input_precision=\"ieee\")\n")],
      "Rescales the running sum l by alpha but not the accumulator acc, so when the running max grows in a later key tile the earlier tiles keep their old scale and the output is wrong.",
      [r"rescal", r"acc(umulator)?", r"alpha", r"exp\(m ?- ?m"]),
    M("s19_kernels_flash_max_not_updated", "kernels.flash_attention_kernel",
      [("        m = m_new\n", "")],
      "Never stores m = m_new at the end of the loop body, so the running max stays -inf: alpha = exp(-inf) = 0 wipes l and acc at every tile and only the last key tile counts.",
      [r"m ?= ?m_new", r"running max(imum)?", r"never (updated|stored)|not (updated|stored)", r"last (key )?tile"]),
    M("s19_kernels_flash_mask_outside_loop", "kernels.flash_attention_kernel",
      [("    for start_n in range(0, hi, BLOCK_N):\n",
        "    visible = (offs_n[None, :] < S) & (offs_n[None, :] <= start + rows[:, None])\n"
        "    for start_n in range(0, hi, BLOCK_N):\n"),
       ("        visible = (cols[None, :] < S) & (cols[None, :] <= start + rows[:, None])\n", "")],
      "Builds the visibility mask once before the loop from offs_n, the first tile's key indices, so every later tile is masked as if its keys were 0 .. BLOCK_N - 1: future keys and keys past S get through.",
      [r"outside the loop|before the loop|once", r"offs_n", r"cols", r"every (later )?tile|each tile"]),
    M("s19_kernels_flash_hi_excludes_diagonal_tile", "kernels.flash_attention_kernel",
      [("    hi = tl.minimum(S, start + first + BLOCK_M)              # keys after the block's last position: skipped\n",
        "    hi = tl.minimum(S, start + first)                        # keys after the block's last position: skipped\n")],
      "Ends the key loop at start + first, the block's first query position, instead of start + first + BLOCK_M, so the tile holding the diagonal is skipped: queries miss their own and nearby keys (the first block sees no key at all and gives NaN).",
      [r"BLOCK_M", r"diagonal", r"hi\b|loop (end|bound)|upper bound", r"nan|no keys?"]),
    M("s19_kernels_flash_cols_not_advanced", "kernels.flash_attention_kernel",
      [("        cols = start_n + offs_n                              # key indices j\n",
        "        cols = offs_n                                        # key indices j\n")],
      "Leaves the key indices at offs_n instead of start_n + offs_n, so every iteration loads and masks the first tile's keys again and the later keys are never seen.",
      [r"start_n", r"advanc|offset", r"first tile|same (tile|keys)", r"never (seen|loaded)"]),

    # ---------------- bpe ----------------
    M("s19_bpe_pair_counts_range_len_minus_2", "bpe.pair_counts",
      [("        for pair in zip(word, word[1:]):\n"
        "            counts[pair] += n\n",
        "        for i in range(len(word) - 2):\n"
        "            counts[(word[i], word[i + 1])] += n\n")],
      "Loops i over range(len(word) - 2), one short, so the last pair of every word is never counted.",
      [r"len\(word\) ?- ?2", r"last pair", r"off[- ]by[- ]one", r"len\(word\) ?- ?1"]),
    M("s19_bpe_pair_counts_set_of_pairs", "bpe.pair_counts",
      [("        for pair in zip(word, word[1:]):\n"
        "            counts[pair] += n\n",
        "        for pair in set(zip(word, word[1:])):\n"
        "            counts[pair] += n\n")],
      "Loops over set(zip(...)), so a pair that occurs several times in one word (overlaps such as (7, 7, 7) included) is counted once per word instead of every time.",
      [r"set\(", r"once per word|only once", r"overlap|repeat\w*|several times", r"duplicat"]),
    M("s19_bpe_merge_pair_step_one", "bpe.merge_pair",
      [("            out.append(new_id)\n"
        "            i += 2\n",
        "            out.append(new_id)\n"
        "            i += 1\n")],
      "Moves on by one instead of two after a merge, so the pair's second symbol is used again: (7, 7, 7) with (7, 7) gives (256, 256, 7) instead of (256, 7), and (1, 2, 3) with (1, 2) keeps the 2.",
      [r"i ?\+= ?2", r"i ?\+= ?1", r"second (symbol|token|element)", r"skip|jump|twice|again"]),
    M("s19_bpe_merge_pair_while_len_minus_1", "bpe.merge_pair",
      [("    while i < len(word):\n", "    while i < len(word) - 1:\n")],
      "Loops while i < len(word) - 1, so when the last symbol is not part of a merge it is dropped from the word.",
      [r"len\(word\) ?- ?1", r"last (symbol|token|element)", r"drop|lost|missing", r"off[- ]by[- ]one"]),
    M("s19_bpe_merge_pair_for_loop_skip_ignored", "bpe.merge_pair",
      [("    out, i = [], 0\n"
        "    while i < len(word):\n"
        "        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:\n"
        "            out.append(new_id)\n"
        "            i += 2\n"
        "        else:\n"
        "            out.append(word[i])\n"
        "            i += 1\n",
        "    out = []\n"
        "    for i in range(len(word)):\n"
        "        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:\n"
        "            out.append(new_id)\n"
        "            i += 2\n"
        "        else:\n"
        "            out.append(word[i])\n")],
      "Uses a for loop over range(len(word)) and does i += 2 after a merge, which has no effect on a for loop's variable, so the pair's second symbol is visited and emitted again.",
      [r"for loop|for i in range", r"i ?\+= ?2", r"no effect|does not skip|ignored|reassign", r"while"]),
    M("s19_bpe_best_pair_loop_ge_no_tie_key", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n",
        "    best = None\n"
        "    for p, n in counts.items():\n"
        "        if best is None or n >= counts[best]:\n"
        "            best = p\n"
        "    return best\n")],
      "Keeps the running best with n >= counts[best] and never consults tie_key, so among equal counts the pair seen last wins instead of the one with the smallest tie_key.",
      [r"tie_key", r">=", r"ties?|equal counts", r"last (one|pair|seen)"]),
    M("s19_bpe_best_pair_loop_count_not_updated", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n",
        "    best, best_n = None, 0\n"
        "    for p, n in counts.items():\n"
        "        if n > best_n or (n == best_n and tie_key(p) < tie_key(best)):\n"
        "            best = p\n"
        "    return best\n")],
      "Never updates best_n in the loop, so every pair beats the starting count 0 and the last pair in the dict is returned instead of the most frequent.",
      [r"best_n", r"never (updated|set)|not updated", r"last pair|last (one|key)", r"most frequent"]),
    M("s19_bpe_train_append_before_new_id", "bpe.train_bpe",
      [("        new_id = 256 + len(merges)\n",
        "        merges.append(pair)\n"
        "        new_id = 256 + len(merges)\n"),
       ("        words = merged\n"
        "        merges.append(pair)\n",
        "        words = merged\n")],
      "Appends the pair to merges before computing new_id = 256 + len(merges), so merge r makes token 257 + r instead of 256 + r and every later merge that uses a merged token names it by the wrong id.",
      [r"257|off[- ]by[- ]one", r"before", r"256 ?\+ ?len\(merges\)", r"new_id|wrong id"]),
    M("s19_bpe_train_dict_changed_while_iterating", "bpe.train_bpe",
      [("        merged = Counter()\n"
        "        for word, n in words.items():\n"
        "            merged[merge_pair(word, pair, new_id)] += n\n"
        "        words = merged\n",
        "        for word in words:\n"
        "            new = merge_pair(word, pair, new_id)\n"
        "            if new != word:\n"
        "                words[new] = words.pop(word)\n")],
      "Rewrites the words dict (pop and insert) while iterating over it, which raises RuntimeError (dictionary changed during iteration) as soon as a word is merged.",
      [r"changed (size )?during iteration|while iterating", r"RuntimeError", r"new dict|copy|list\(words", r"pop"]),
    M("s19_bpe_train_return_in_loop", "bpe.train_bpe",
      [("        words = merged\n"
        "        merges.append(pair)\n"
        "    return merges\n",
        "        words = merged\n"
        "        merges.append(pair)\n"
        "        return merges\n")],
      "The return merges sits one indent too deep, inside the loop, so training stops after the first merge (and returns None when the loop ends without one).",
      [r"return", r"indent|inside the loop", r"first merge|one merge|single merge", r"none"]),
    M("s19_bpe_encode_leftmost_pair", "bpe.encode",
      [("            pair = min(pairs, key=rank.__getitem__)\n", "            pair = pairs[0]\n")],
      "Takes pairs[0], the leftmost mergeable pair in the word, instead of the one with the lowest rank (learned earliest), so merges are applied in the wrong order.",
      [r"pairs\[0\]", r"leftmost|first (pair|one) (found|in the word)", r"rank|learned (first|earliest)|lowest", r"order"]),
    M("s19_bpe_encode_break_too_deep", "bpe.encode",
      [("            word = merge_pair(word, pair, 256 + rank[pair])\n",
        "            word = merge_pair(word, pair, 256 + rank[pair])\n"
        "            break\n")],
      "A break at the end of the while body stops after the first merge, so each word gets at most one merge instead of merges until none applies.",
      [r"break", r"one merge|first merge|single merge", r"until no|repeat|again", r"indent"]),
    M("s19_bpe_decode_per_token", "bpe.decode",
      [("    return b\"\".join(table[i] for i in ids).decode(\"utf-8\", errors=\"replace\")\n",
        "    return \"\".join(table[i].decode(\"utf-8\", errors=\"replace\") for i in ids)\n")],
      "Decodes each token's bytes separately inside the loop, so a character whose UTF-8 bytes span two tokens becomes U+FFFD replacement characters instead of the character.",
      [r"separately|each token|per token|one token at a time", r"span|split across|multi-?byte", r"fffd|replacement", r"join (the )?bytes|decode (the )?whole"]),
    M("s19_bpe_decode_range_255", "bpe.decode",
      [("    table = [bytes([b]) for b in range(256)]\n", "    table = [bytes([b]) for b in range(255)]\n")],
      "Builds the byte table over range(255), so byte 255 is missing and every merged token lands one place early: ids 255 and up decode to the wrong bytes (or raise).",
      [r"range\(255\)", r"256", r"byte 255|last byte", r"off[- ]by[- ]one"]),

    # ---------------- optim ----------------
    M("s19_optim_lr_warmup_le", "optim.lr_at",
      [("    if step < warmup_steps:\n", "    if step <= warmup_steps:\n")],
      "Uses step <= warmup_steps, so step warmup_steps still counts as warm-up and gets lr·(w + 1)/w, above the peak lr, instead of starting the cosine at lr.",
      [r"<=", r"warmup_steps|warm-?up", r"above (the )?(peak|lr)|exceeds|overshoot|too (high|large)", r"off[- ]by[- ]one"]),
    M("s19_optim_lr_progress_not_capped", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1\n",
        "    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)            # 0 .. 1\n")],
      "Does not cap progress at 1, so after max_steps the cosine climbs back up from min_lr instead of staying at min_lr.",
      [r"min\(1", r"cap|clamp|clip", r"after max_steps|past max_steps|beyond", r"climbs?|rises?|back up|goes up"]),
    M("s19_optim_lr_progress_over_max_steps", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1\n",
        "    progress = min(1.0, (step - warmup_steps) / max(1, max_steps))                   # 0 .. 1\n")],
      "Divides by max_steps instead of max_steps - warmup_steps, so the cosine has not reached min_lr at max_steps.",
      [r"max_steps ?- ?warmup_steps", r"denominator|divid", r"min_lr", r"progress"]),
    M("s19_optim_adamw_l2_into_grad", "optim.adamw_step",
      [("    m = beta1 * m + (1 - beta1) * grad                         # running mean of g\n",
        "    grad = grad + weight_decay * param                         # decay through the gradient\n"
        "    m = beta1 * m + (1 - beta1) * grad                         # running mean of g\n"),
       ("    param = param * (1 - lr * weight_decay)                    # decoupled: not through the gradient\n", "")],
      "Adds weight_decay·param to the gradient (L2, plain Adam's way) instead of shrinking param by lr·weight_decay, so the decay is divided by sqrt(v̂) like the gradient.",
      [r"l2", r"decoupl", r"gradient", r"weight[_ ]decay"]),
    M("s19_optim_adamw_eps_inside_sqrt", "optim.adamw_step",
      [("    param = param - lr * m_hat / (v_hat.sqrt() + eps)\n",
        "    param = param - lr * m_hat / (v_hat + eps).sqrt()\n")],
      "Adds eps inside the square root instead of after it, so for small gradients the step is much smaller than AdamW's.",
      [r"eps", r"inside (the )?(square root|sqrt)", r"after (the )?(square root|sqrt)|outside", r"sqrt"]),

    # ---------------- inside ----------------
    M("s19_inside_residual_blocks_only", "inside.residual_stream",
      [("    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]\n",
        "    handles = []\n"
        "    for block in model.blocks:\n"
        "        handles.append(block.register_forward_hook(lambda mod, inp, out: seen.append(out)))\n")],
      "Registers hooks in a loop over model.blocks only, forgetting model.embed, so the stream has L entries instead of L + 1 and is missing the embeddings.",
      [r"model\.embed|embedding", r"L ?\+ ?1", r"entry 0|first entry", r"only (the )?blocks"]),
    M("s19_inside_residual_break_in_remove_loop", "inside.residual_stream",
      [("        for handle in handles:\n"
        "            handle.remove()\n"
        "    return torch.stack(seen)                                           # (L + 1, B, T, D)\n",
        "        for handle in handles:\n"
        "            handle.remove()\n"
        "            break\n"
        "    return torch.stack(seen)                                           # (L + 1, B, T, D)\n")],
      "A break inside the removal loop removes only the first hook, so the hooks on the blocks stay registered after the probe and keep recording on every later forward pass.",
      [r"break", r"only the first hook|first handle", r"remov", r"stay|left (behind|registered)|leak"]),
    M("s19_inside_patterns_stack_dim1", "inside.attention_patterns",
      [("    return torch.stack(patterns)                                       # (L, B, H, T, T)\n",
        "    return torch.stack(patterns, dim=1)                                # (L, B, H, T, T)\n")],
      "Stacks the per-block patterns on dim=1, giving (B, L, H, T, T) instead of (L, B, H, T, T).",
      [r"stack", r"dim ?= ?1|wrong (axis|dim)", r"\(B, ?L, ?H", r"layer axis|first axis"]),
    M("s19_inside_patterns_block_input", "inside.attention_patterns",
      [("    handles = [block.attn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]\n",
        "    handles = [block.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]\n")],
      "Hooks the block instead of block.attn, so it records the block's raw input rather than the normalised stream the attention reads, and the recomputed weights are wrong.",
      [r"block\.attn", r"normali[sz]ed|ln1", r"raw input|block'?s (own )?input", r"pre[_-]?hook"]),
    M("s19_inside_lens_loop_drops_last", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)\n",
        "        return torch.stack([model.ln_f(stream[l]) @ model.output_weight().T for l in range(stream.shape[0] - 1)])\n")],
      "Loops over range(stream.shape[0] - 1), so the last entry (the model's own logits) is left out: L entries instead of L + 1.",
      [r"shape\[0\] ?- ?1|L ?\+ ?1", r"last (entry|layer)", r"off[- ]by[- ]one", r"model's own logits|final"]),
    M("s19_inside_lens_token_table", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)\n",
        "        return model.ln_f(stream) @ model.embed.token_table.T          # (L + 1, B, T, V)\n")],
      "Reads the stream out through the token table instead of model.output_weight(), which is wrong for an untied model whose head is its own matrix.",
      [r"token_table", r"output_weight", r"tied|untied", r"head"]),
    M("s19_inside_induction_loop_drops_last_query", "inside.induction_scores",
      [("    t = torch.arange(period, patterns.shape[-2], device=patterns.device)    # the queries of the repeat\n"
        "    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n",
        "    total = 0\n"
        "    for t in range(period, patterns.shape[-2] - 1):\n"
        "        total = total + patterns[..., t, t - period + 1]\n"
        "    return total.mean(dim=1) / (patterns.shape[-2] - 1 - period)      # (L, H)\n")],
      "Loops the queries over range(period, T - 1), leaving out the last query T - 1, so its weight is not in the average.",
      [r"T ?- ?1|shape\[-2\] ?- ?1", r"last query", r"off[- ]by[- ]one", r"range\(period"]),
    M("s19_inside_induction_same_token_key", "inside.induction_scores",
      [("    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n",
        "    return patterns[..., t, t - period].mean(dim=(1, 3))               # (L, B, H, P') -> (L, H)\n")],
      "Takes key t - period, the earlier copy of the same token, instead of t - period + 1, the token that followed it.",
      [r"t ?- ?period ?\+ ?1", r"same token|earlier copy|previous copy", r"follow|next token|after it", r"off[- ]by[- ]one"]),
]

VARIANTS = [
    V("s19_embeddings_lookup_loop_ok", "embeddings.embed_lookup",
      [("    return table[ids]\n",
        "    flat = ids.reshape(-1)\n"
        "    rows = [table[flat[n]] for n in range(flat.shape[0])]\n"
        "    return torch.stack(rows).view(*ids.shape, table.shape[1])\n")],
      "One row per id in a Python loop over the flattened ids, stacked and viewed back to ids' shape plus D: same values, dtype and gradient, any shape of ids."),
    V("s19_embeddings_nearest_repeated_argmax_ok", "embeddings.nearest_tokens",
      [("    return torch.topk(scores, k).indices              # (k,), the largest score first\n",
        "    scores = scores.clone()\n"
        "    ids = []\n"
        "    for _ in range(k):\n"
        "        best = scores.argmax()\n"
        "        ids.append(best)\n"
        "        scores[best] = float(\"-inf\")\n"
        "    return torch.stack(ids)\n")],
      "k rounds of argmax on a copy of the scores, each winner set to -inf before the next round: the same ids, best first, as torch.topk."),
    V("s19_attention_average_past_running_sum_ok", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)\n",
        "    wide = torch.promote_types(x.dtype, torch.float32)\n"
        "    acc = torch.zeros_like(x[..., 0, :], dtype=wide)\n"
        "    outs = []\n"
        "    for i in range(T):\n"
        "        acc = acc + x[..., i, :].to(wide)\n"
        "        outs.append((acc / (i + 1)).to(x.dtype))\n"
        "    return torch.stack(outs, dim=-2)                   # (..., T, D)\n")],
      "A running sum in at least fp32, rebuilt (not updated in place) at each step, divided by i + 1 and cast back to x's dtype: the same means up to rounding."),
    V("s19_attention_avg_weights_row_loop_ok", "attention.causal_average_weights",
      [("    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones\n"
        "    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count\n",
        "    w = torch.zeros(T, T)\n"
        "    for i in range(T):\n"
        "        w[i, :i + 1] = 1.0 / (i + 1)\n"
        "    return w\n")],
      "Fills row i's first i + 1 columns with 1/(i + 1) in a loop: the same float32 matrix."),
    V("s19_attention_causal_mask_nested_loop_ok", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n"
        "    j = torch.arange(S, device=device)[None, :]   # (1, S)\n"
        "    return j <= i + (S - T)\n",
        "    rows = [[j <= i + (S - T) for j in range(S)] for i in range(T)]\n"
        "    return torch.tensor(rows, dtype=torch.bool, device=device).view(T, S)\n")],
      "The mask from a nested Python loop of comparisons, made into a bool tensor on the device: the same (T, S) mask, cache offset included."),
    V("s19_attention_scores_key_loop_ok", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n",
        "    return torch.stack([(q * k[..., j:j + 1, :]).sum(-1) for j in range(k.shape[-2])], dim=-1)\n")],
      "One key's column of dot products per loop step, stacked on the last axis: the same (..., T, S) scores up to rounding."),
    V("s19_attention_softmax_running_max_ok", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n",
        "    m = scores[..., :1]\n"
        "    for j in range(1, scores.shape[-1]):\n"
        "        m = torch.maximum(m, scores[..., j:j + 1])\n"
        "    z = scores - m\n")],
      "The row maximum as a running torch.maximum over the key columns, kept as a column: the same shift, so the same softmax."),
    V("s19_attention_weighted_sum_key_loop_ok", "attention.weighted_sum",
      [("    return weights @ v\n",
        "    wide = torch.promote_types(weights.dtype, torch.float32)\n"
        "    out = weights[..., :, :1].to(wide) * v[..., :1, :].to(wide)\n"
        "    for j in range(1, v.shape[-2]):\n"
        "        out = out + weights[..., :, j:j + 1].to(wide) * v[..., j:j + 1, :].to(wide)\n"
        "    return out.to(weights.dtype)\n")],
      "Adds each key's value times its column of weights, looping over the S keys, accumulating in at least fp32 (as a matrix product does) and cast back to the inputs' dtype."),
    V("s19_multihead_split_stack_loop_ok", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    K = HK // n_heads\n"
        "    return torch.stack([x[..., h * K:(h + 1) * K] for h in range(n_heads)], dim=1)\n")],
      "Slices head h's K features in a loop and stacks the heads on dim=1: the same (B, H, T, K) values (a copy rather than a view)."),
    V("s19_multihead_merge_cat_loop_ok", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n",
        "    return torch.cat([x[:, h] for h in range(H)], dim=-1)\n")],
      "Concatenates the heads' (B, T, K) outputs along the features in a loop over the heads: the same (B, T, H·K)."),
    V("s19_multihead_entropy_head_loop_ok", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)\n"
        "    return per_query.mean(dim=(0, 2))                                  # (H,)\n",
        "    per_head = [-torch.xlogy(weights[:, h], weights[:, h]).sum(dim=-1).mean() for h in range(weights.shape[1])]\n"
        "    return torch.stack(per_head)                                       # (H,)\n")],
      "One head at a time: mean over batch and queries of -sum xlogy, stacked into (H,), keeping the gradient and dtype."),
    V("s19_block_sublayer_loop_ok", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n"
        "        x = x + self.drop(self.mlp(self.ln2(x)))\n"
        "        return x\n",
        "        for norm, sublayer in ((self.ln1, lambda h: self.attn(h, cache)), (self.ln2, self.mlp)):\n"
        "            x = x + self.drop(sublayer(norm(x)))\n"
        "        return x\n")],
      "A loop over the (norm, sublayer) pairs, the cache bound into the attention's lambda: the same pre-norm residual updates in the same order (the same dropout draws)."),
    V("s19_model_forward_zip_caches_ok", "model.ANDREA",
      [("        for i, block in enumerate(self.blocks):\n"
        "            x = block(x, caches[i] if caches else None)              # (B, T, D)\n",
        "        for block, cache in zip(self.blocks, caches if caches else [None] * len(self.blocks)):\n"
        "            x = block(x, cache)                                      # (B, T, D)\n")],
      "Pairs each block with its cache by zip (a list of None when there are no caches) instead of by index."),
    V("s19_model_kvcache_position_loop_ok", "model.KVCache",
      [("        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer\n"
        "        self.v[:, :, self.pos:self.pos + T] = v\n",
        "        for t in range(T):\n"
        "            self.k[:, :, self.pos + t] = k[:, :, t]\n"
        "            self.v[:, :, self.pos + t] = v[:, :, t]\n")],
      "Writes the new positions one at a time into slot self.pos + t, then advances pos by T as before: the same buffers and views."),
    V("s19_model_sample_row_loop_topk_ok", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)\n"
        "        logits = logits.masked_fill(logits < kth, float(\"-inf\"))\n",
        "        k = min(top_k, logits.shape[-1])\n"
        "        rows = []\n"
        "        for b in range(logits.shape[0]):\n"
        "            kth = torch.topk(logits[b], k).values[-1]\n"
        "            rows.append(logits[b].masked_fill(logits[b] < kth, float(\"-inf\")))\n"
        "        logits = torch.stack(rows)\n")],
      "Top-k filtering row by row, each row against its own k-th largest logit, stacked back: the same probabilities, so the same multinomial draw."),
    V("s19_modern_rope_freq_position_loop_ok", "modern.rope_frequencies",
      [("    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)              # (T, K/2)\n",
        "    angles = torch.zeros(T, inv_freq.shape[0])\n"
        "    for t in range(T):\n"
        "        angles[t] = t * inv_freq                                                      # (T, K/2)\n")],
      "Fills the angle table one position at a time, t times the frequencies, in float32: the same table as torch.outer."),
    V("s19_modern_rope_apply_pair_loop_ok", "modern.apply_rope",
      [("    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)\n",
        "    first, second = [], []\n"
        "    for i in range(half):\n"
        "        first.append(x1[..., i] * c[:, i] - x2[..., i] * s[:, i])\n"
        "        second.append(x1[..., i] * s[:, i] + x2[..., i] * c[:, i])\n"
        "    return torch.stack(first + second, dim=-1).to(x.dtype)\n")],
      "Turns the pairs (i, i + K/2) one at a time and stacks the first coordinates, then the second ones: the same layout, values and dtype."),
    V("s19_bpe_pair_counts_plain_dict_ok", "bpe.pair_counts",
      [("    counts = Counter()\n"
        "    for word, n in words.items():\n"
        "        for pair in zip(word, word[1:]):\n"
        "            counts[pair] += n\n"
        "    return dict(counts)\n",
        "    counts = {}\n"
        "    for word, n in words.items():\n"
        "        for i in range(len(word) - 1):\n"
        "            pair = (word[i], word[i + 1])\n"
        "            counts[pair] = counts.get(pair, 0) + n\n"
        "    return counts\n")],
      "An index loop over range(len(word) - 1) with a plain dict and .get: the same counts, overlaps included."),
    V("s19_bpe_merge_pair_skip_flag_ok", "bpe.merge_pair",
      [("    out, i = [], 0\n"
        "    while i < len(word):\n"
        "        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:\n"
        "            out.append(new_id)\n"
        "            i += 2\n"
        "        else:\n"
        "            out.append(word[i])\n"
        "            i += 1\n",
        "    out = []\n"
        "    skip = False\n"
        "    for i in range(len(word)):\n"
        "        if skip:\n"
        "            skip = False\n"
        "            continue\n"
        "        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:\n"
        "            out.append(new_id)\n"
        "            skip = True\n"
        "        else:\n"
        "            out.append(word[i])\n")],
      "A for loop with a skip flag that jumps over the second symbol of each merged pair: the same left-to-right, non-overlapping merges."),
    V("s19_bpe_best_pair_explicit_loop_ok", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n",
        "    best = None\n"
        "    for p, n in counts.items():\n"
        "        if best is None or n > counts[best] or (n == counts[best] and tie_key(p) < tie_key(best)):\n"
        "            best = p\n"
        "    return best\n")],
      "A running best over the dict, replaced by a larger count or by an equal count with a smaller tie_key; None for an empty dict."),
    V("s19_inside_induction_query_loop_ok", "inside.induction_scores",
      [("    t = torch.arange(period, patterns.shape[-2], device=patterns.device)    # the queries of the repeat\n"
        "    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n",
        "    T = patterns.shape[-2]\n"
        "    total = torch.zeros_like(patterns[..., 0, 0])                      # (L, B, H)\n"
        "    for t in range(period, T):\n"
        "        total = total + patterns[..., t, t - period + 1]\n"
        "    return (total / len(range(period, T))).mean(dim=1)                # (L, H)\n")],
      "Sums the weight on key t - period + 1 over the repeat's queries in a loop, divides by their count and averages over the batch: the same (L, H) scores."),
    V("s19_kernels_gelu_sigmoid_form_ok", "kernels.gelu_kernel",
      [("    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0\n"
        "    y = 0.5 * x * (1.0 + tanh_z)\n",
        "    y = x * tl.sigmoid(2.0 * z)                              # 0.5·(1 + tanh z) = sigmoid(2z)\n")],
      "Uses 0.5·(1 + tanh z) = sigmoid(2z) directly, which also avoids the cancellation of 1 + tanh z for large negative x."),
]
