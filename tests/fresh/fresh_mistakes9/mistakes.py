"""Fresh mistakes in the pieces of solutions/*.py, written as a learner would make them, without
reading the course's own lists of typical mistakes; and unusual but correct variants (the entries:
tests/fresh/fresh_entries.py). tools/fresh_mistakes.py runs them."""
from fresh_entries import M, V

MISTAKES = [
    # ------------------------------------------------------------------ embeddings
    M("s9_embeddings_lookup_squeeze", "embeddings.embed_lookup",
      [("    return table[ids]\n", "    return table[ids].squeeze()\n")],
      "Calling .squeeze() on the looked-up rows drops every axis of size one, so a batch of one "
      "sequence, a one-token sequence or a width-1 table comes back with too few axes.",
      [r"squeeze", r"(axis|axes|dim\w*) of size (1|one)", r"singleton",
       r"(drops?|remov\w+|los\w+) (the |a |an )?(batch|sequence|size.1|length.1) (axis|dim)"]),
    M("s9_embeddings_lookup_detach", "embeddings.embed_lookup",
      [("    return table[ids]\n", "    return table[ids].detach()\n")],
      "Detaching the looked-up rows cuts them out of the autograd graph, so no gradient ever "
      "reaches the embedding table and it never learns.",
      [r"detach", r"no grad\w* (reach|flow|to|for)", r"(table|embedding)\w* (gets|receives|has) no grad",
       r"(cut|break)s? (the )?(gradient|graph)", r"\.grad is None"]),
    M("s9_embeddings_onehot_float32", "embeddings.embed_onehot",
      [("    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)  # (B, T, V)\n",
        "    one_hot = F.one_hot(ids, num_classes=table.shape[0]).float()  # (B, T, V)\n")],
      "The one-hot matrix is always made float32 with .float() instead of the table's dtype, so a "
      "float64 (or bf16) table makes the matrix product fail with a dtype mismatch.",
      [r"\.float\(\)", r"float32.*(float64|double|table'?s dtype)",
       r"(float64|double|bfloat16|bf16).*(mismatch|different dtype)", r"dtype mismatch",
       r"not (in )?the table'?s dtype"]),
    M("s9_embeddings_positions_batch_axis", "embeddings.add_positions",
      [("    T = tok.shape[1]\n", "    T = tok.shape[0]\n")],
      "The number of positions is read from tok.shape[0], the batch size, instead of tok.shape[1], "
      "so the slice of the position table has B rows, which fails or is wrong whenever B differs from T.",
      [r"shape\[0\]", r"batch (size|axis|dimension) (instead of|rather than|as|for) (the )?(sequence|T\b|position|length)",
       r"\bB rows", r"(uses|reads|takes) (the )?batch (size|axis)"]),
    M("s9_embeddings_positions_slice_end", "embeddings.add_positions",
      [("    return tok + position_table[start:start + T]    # (T, D) broadcasts over B\n",
        "    return tok + position_table[start:T]    # (T, D) broadcasts over B\n")],
      "The slice position_table[start:T] stops at row T instead of start + T, so with a nonzero "
      "start it takes only T - start rows and fails to line up with the tokens (or broadcasts one row).",
      [r"\[start\s*:\s*T\]", r"(stop|end)s? at (row )?T\b", r"T\s*-\s*start rows",
       r"slice (end|stop)\w*", r"start\s*\+\s*T"]),
    M("s9_embeddings_cosine_global_sum", "embeddings.cosine_similarity",
      [("    dot = (u * v).sum(-1)\n", "    dot = (u * v).sum()\n")],
      "The dot product is summed over every element instead of the last axis, so a batch of vector "
      "pairs shares one total in every numerator and the cosines are wrong.",
      [r"\.sum\(\)", r"sum\w* over (all|every|the whole)", r"(without|no|missing) (a )?dim\w*",
       r"(one|single) (shared |global )?(total|scalar|dot product)", r"not (over|along) the (last|feature) (axis|dim)"]),
    M("s9_embeddings_cosine_precedence", "embeddings.cosine_similarity",
      [("    return dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)\n",
        "    return dot / u.norm(dim=-1) * v.norm(dim=-1).clamp_min(eps)\n")],
      "Without parentheses around the product of the norms, dot / |u| * |v| divides by |u| and then "
      "multiplies by |v|, and a zero u divides by zero.",
      [r"parenthes", r"precedence", r"multipl\w+ by (the norm of v|\|v\||v'?s (norm|length))",
       r"left.to.right", r"divid\w+ by (only )?(the norm of u|\|u\||u'?s)"]),
    M("s9_embeddings_nearest_values", "embeddings.nearest_tokens",
      [("    return torch.topk(scores, k).indices              # (k,), the largest score first\n",
        "    return torch.topk(scores, k).values              # (k,), the largest score first\n")],
      "topk(...).values returns the k best similarity scores themselves, not their places in the "
      "table, so the function gives floats instead of token ids.",
      [r"\.values", r"(scores|similarit\w+|cosines)( themselves)? (instead of|not|rather than) (the )?(ids|indices)",
       r"float\w* (instead of|not) (integer )?(ids|indices)", r"not the indices"]),
    M("s9_embeddings_nearest_dot", "embeddings.nearest_tokens",
      [("    scores = cosine_similarity(table, query)          # (V, D) with (D,) -> (V,)\n",
        "    scores = table @ query          # (V, D) with (D,) -> (V,)\n")],
      "Rows are ranked by the raw dot product table @ query instead of the cosine, so long rows win "
      "even when they point away from the query.",
      [r"dot product", r"table\s*@\s*query", r"(not|without|instead of) (the )?cosine",
       r"(length|norm|magnitude) of (the )?rows?", r"unnormali[sz]ed"]),
    M("s9_embeddings_module_no_start", "embeddings.Embeddings",
      [("        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)\n",
        "        x = add_positions(embed_lookup(self.token_table, ids), self.position_table)\n")],
      "start is not passed to add_positions, so with a KV cache the new tokens get the position "
      "vectors of positions 0, 1, ... instead of their real positions.",
      [r"start (is )?(not passed|never passed|ignored|dropped|forgotten|missing)",
       r"(forg[eo]t\w*|omit\w*|drop\w*|ignor\w*) (the )?start", r"default start",
       r"positions? (0|zero)\b.*(cache|instead)"]),

    # ------------------------------------------------------------------ attention
    M("s9_attention_average_excludes_self", "attention.average_past",
      [("x[..., :i + 1, :].mean(dim=-2) for i in range(T)]", "x[..., :i, :].mean(dim=-2) for i in range(T)]")],
      "The slice x[..., :i, :] stops before position i, so each position averages only the ones "
      "strictly before it and position 0 takes the mean of nothing (NaN).",
      [r":i\b(?!\s*\+)", r"off.by.one", r"(exclud|leav|omit|miss|skip)\w* (position i|itself|the current|its own)",
       r"mean of (an empty|nothing|no )", r"position 0.*(nan|empty)"]),
    M("s9_attention_average_cumsum_broadcast", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)\n",
        "    return torch.cumsum(x, dim=-2) / torch.arange(1, T + 1)   # (..., T, D)\n")],
      "The running sum is divided by torch.arange(1, T + 1), a (T,) vector that broadcasts along the "
      "last (feature) axis instead of down the positions, so it fails when D != T and divides the "
      "wrong entries when D == T.",
      [r"broadcast\w* (along|over|against|across) the (last|feature|D\b)", r"arange\(1,\s*T\s*\+\s*1\)",
       r"\[:,\s*None\]", r"(count|divisor)s? .*(feature axis|last axis)", r"(column|\(T, ?1\))"]),
    M("s9_attention_avgweights_no_keepdim", "attention.causal_average_weights",
      [("    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count\n",
        "    return w / w.sum(dim=-1)           # each row divided by its count\n")],
      "Without keepdim the row counts form a (T,) vector that broadcasts across the columns, so "
      "column j is divided by j + 1 and the rows no longer sum to 1.",
      [r"keepdim", r"column j .*divided", r"broadcast\w* (across|over|along) (the )?columns",
       r"rows? (no longer|don'?t|do not) sum to (1|one)", r"divid\w+ (each )?column"]),
    M("s9_attention_avgweights_float64", "attention.causal_average_weights",
      [("    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones\n",
        "    w = torch.tril(torch.ones(T, T, dtype=torch.float64))                 # (T, T), row i: i + 1 ones\n")],
      "The matrix is built in float64 although the docstring asks for float32, so W @ x with an "
      "ordinary float32 x fails with a dtype mismatch.",
      [r"float64", r"double", r"float32 .*(asked|required|expected|docstring|spec)",
       r"dtype (mismatch|is wrong)", r"wrong dtype"]),
    M("s9_attention_softweights_columns", "attention.causal_softmax_weights",
      [("    return torch.softmax(scores, dim=-1)\n", "    return torch.softmax(scores, dim=0)\n")],
      "The softmax runs down each column (dim=0) instead of along each row, so the columns sum to 1 "
      "and row i no longer spreads 1/(i + 1) over its past.",
      [r"dim\s*=\s*0", r"(down|over|along) (the |each )?columns?", r"columns? (sum|add up) to (1|one)",
       r"softmax (over|along) the wrong (axis|dim)"]),
    M("s9_attention_scores_transpose01", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n", "    return q @ k.transpose(0, 1)\n")],
      "k.transpose(0, 1) swaps the first two axes, which is right only for a plain (S, K) matrix; "
      "with batch or head axes in front it swaps those instead of laying the keys on their side.",
      [r"transpose\(0,\s*1\)", r"(first|leading) two (axes|dims|dimensions)",
       r"(batch|head) (axis|axes|dim\w*) .*(swapped|transposed|exchanged)",
       r"only (works|correct|right) for (2.?d|two.dimensional|a (plain |single )?matrix)"]),
    M("s9_attention_scores_reshape_not_transpose", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n",
        "    return q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2])\n")],
      "Reshaping k to (..., K, S) reinterprets its memory instead of transposing it, so the numbers "
      "land in the wrong places and the scores are not q·k.",
      [r"reshap\w* (instead of|rather than|is not|isn'?t) (a )?transpos", r"reinterpret",
       r"(view|reshape) (is not|isn'?t|does not|doesn'?t) (a )?transpos", r"(memory|element) order", r"scrambl"]),
    M("s9_attention_scale_precedence", "attention.scale_scores",
      [("    return scores / math.sqrt(d_head)\n", "    return scores / d_head ** 1 / 2\n")],
      "Writing d_head ** 1 / 2 for the square root divides by d_head and then by 2 (operator "
      "precedence), so the scores are scaled by 1/(2K) instead of 1/sqrt(K).",
      [r"precedence", r"\*\*\s*1\s*/\s*2", r"1\s*/\s*\(\s*2\s*\*?\s*(K|d_head)", r"\b2K\b",
       r"\*\* ?\(1 ?/ ?2\)"]),
    M("s9_attention_scale_by_keys", "attention.scale_scores",
      [("    return scores / math.sqrt(d_head)\n", "    return scores / math.sqrt(scores.shape[-1])\n")],
      "The scale uses scores.shape[-1], the number of keys S, instead of the head width d_head, so "
      "the scores are divided by sqrt(S), which is wrong whenever S != K.",
      [r"shape\[-1\]", r"(number|count) of keys", r"sqrt\(S\)", r"(ignor\w+|not us\w+|unused) (the )?d_head",
       r"(key|sequence) length (instead of|rather than|not) (the )?(head width|d_head|K\b)"]),
    M("s9_attention_mask_no_offset", "attention.causal_mask",
      [("    return j <= i + (S - T)\n", "    return j <= i\n")],
      "The offset S - T of the cached keys is left out, so with a cache each new query sees only keys "
      "up to its row number instead of everything up to its own absolute position.",
      [r"S\s*-\s*T", r"offset", r"(cache|cached keys).*(ignor|left out|forgot|miss)", r"absolute position",
       r"(ignor\w+|forg[eo]t\w*) (the )?(cache|cached)"]),
    M("s9_attention_apply_mask_leading_axes", "attention.apply_causal_mask",
      [("    T, S = scores.shape[-2:]\n", "    T, S = scores.shape[:2]\n")],
      "The sizes are taken from scores.shape[:2], the leading axes, so for batched (B, H, T, S) scores "
      "the mask is built from the batch and head counts instead of T and S.",
      [r"shape\[:2\]", r"(first|leading) two (axes|sizes|dims|dimensions)",
       r"(batch|head) (count|size)s? (instead of|rather than|as) (T\b|the (query|number))",
       r"last two (axes|sizes|dims)"]),
    M("s9_attention_apply_mask_swapped_args", "attention.apply_causal_mask",
      [("    allowed = causal_mask(T, S, device=scores.device)\n",
        "    allowed = causal_mask(S, T, device=scores.device)\n")],
      "causal_mask is called with S and T swapped, so with cached keys (S > T) the mask has shape "
      "(S, T) and does not fit the (T, S) scores.",
      [r"causal_mask\(S,\s*T", r"(swap|switch|revers|transpos)\w* .*(S and T|T and S|arguments|argument order)",
       r"\(S,\s*T\)", r"argument order"]),
    M("s9_attention_softmax_max_tuple", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n", "    z = scores - scores.max(dim=-1, keepdim=True)\n")],
      "scores.max(dim=-1, keepdim=True) returns a (values, indices) pair, not a tensor, so "
      "subtracting it fails.",
      [r"\.max\(dim", r"(values|indices).*(pair|tuple)|(pair|tuple).*(values|indices)", r"\.values\b",
       r"return_types", r"\b(use|needs?|should be|instead of) (torch\.)?amax"]),
    M("s9_attention_softmax_inplace_shift", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n",
        "    z = scores.sub_(scores.amax(dim=-1, keepdim=True))\n")],
      "sub_ shifts the caller's scores in place, so the input is overwritten and backward fails "
      "because amax saved the tensor that was then modified.",
      [r"sub_", r"in.place", r"(overwrit|modif|mutat|chang)\w* (the )?(caller'?s |input|scores)",
       r"modified by an inplace operation", r"version (counter|mismatch)"]),
    M("s9_attention_weighted_bmm", "attention.weighted_sum",
      [("    return weights @ v\n", "    return torch.bmm(weights, v)\n")],
      "torch.bmm only accepts 3-D batches, so weights and values with head axes (B, H, T, S) or a "
      "plain 2-D matrix fail.",
      [r"bmm", r"\b3.?d(imensional)?\b", r"(only|exactly) (three|3) (axes|dims|dimensions)",
       r"(4.?d|four.dimensional) (input|tensor|weights)"]),
    M("s9_attention_mask_not_assigned", "attention.attention",
      [("        scores = apply_causal_mask(scores)\n", "        apply_causal_mask(scores)\n")],
      "The result of apply_causal_mask is thrown away (it returns a new tensor and does not change "
      "scores in place), so the mask is never applied and queries see the future.",
      [r"(result|return value|output) .*(discard|thrown away|ignored|not assigned|never assigned|lost)",
       r"not (re)?assign", r"(does not|doesn'?t) (modify|change) .*in.place",
       r"(mask|masking) (is )?never applied", r"see (the )?future"]),
    M("s9_attention_causal_is_not_none", "attention.attention",
      [("    if causal:\n", "    if causal is not None:\n")],
      "`causal is not None` is true for False as well, so attention(..., causal=False) still applies "
      "the causal mask.",
      [r"is not None", r"causal\s*=\s*False .*(still|also|masked)", r"(always|even when) .*mask",
       r"False is not None"]),
    M("s9_attention_head_wq_for_keys", "attention.AttentionHead",
      [("        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)\n",
        "        return attention(self.w_q(x), self.w_q(x), self.w_v(x), causal=True)\n")],
      "The keys are computed with self.w_q instead of self.w_k (a copy-paste slip), so the keys equal "
      "the queries and w_k is never used.",
      [r"w_q.*(twice|for (the )?keys|instead of (self\.)?w_k)", r"w_k (is )?(never|not) used",
       r"keys? (equal|are|=) (the )?quer", r"copy.?paste"]),

    # ------------------------------------------------------------------ multihead
    M("s9_multihead_split_true_division", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    return x.view(B, T, n_heads, HK / n_heads).transpose(1, 2)\n")],
      "HK / n_heads is true division and gives a float, which .view refuses as a size; the head "
      "width needs integer division //.",
      [r"HK / n_heads", r"true division", r"float (size|dimension|argument)", r"(integer|floor) division",
       r"tuple of ints"]),
    M("s9_multihead_split_interleaved", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    return x.view(B, T, HK // n_heads, n_heads).permute(0, 3, 1, 2)\n")],
      "Viewing the features as (K, H) instead of (H, K) interleaves the heads, so head h gets "
      "features h, h + H, h + 2H, ... instead of its own contiguous block of K.",
      [r"\(K,\s*H\)", r"interleav", r"stride\w* (of|by) H\b", r"(contiguous|consecutive) (block|slice|chunk)",
       r"h,\s*h\s*\+\s*H"]),
    M("s9_multihead_merge_no_transpose", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n", "    return x.reshape(B, T, H * K)\n")],
      "Reshaping (B, H, T, K) straight to (B, T, H·K) without first moving the positions back in "
      "front of the heads mixes positions and heads.",
      [r"(without|no|missing|forg[eo]t\w*) (the )?transpose", r"(mix|scrambl|interleav)\w* (the )?(positions|heads)",
       r"reshap\w* (straight|directly)", r"memory order"]),
    M("s9_multihead_merge_heads_last", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n", "    return x.permute(0, 2, 3, 1).reshape(B, T, H * K)\n")],
      "Permuting to (B, T, K, H) before flattening puts the head axis last, so the merged features "
      "are interleaved across heads instead of each head's K features side by side in a block.",
      [r"permute\(0,\s*2,\s*3,\s*1\)", r"\(B,\s*T,\s*K,\s*H\)", r"interleav", r"head (axis )?(last|innermost)"]),
    M("s9_multihead_mha_chunk3", "multihead.MultiHeadAttention",
      [("        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)   # (B, T, H·K), (B, T, G·K) x2\n",
        "        q, k, v = self.qkv(x).chunk(3, dim=-1)   # (B, T, H·K), (B, T, G·K) x2\n")],
      "chunk(3) cuts the fused projection into three equal parts, which is only right when G = H; "
      "with grouped key/value heads the query block is H·K wide and the key and value blocks G·K each.",
      [r"chunk", r"(three )?equal (parts|pieces|thirds)", r"G\s*(<|!=|≠)\s*H",
       r"assum\w+ G\s*==?\s*H", r"split sizes"]),
    M("s9_multihead_mha_share_discarded", "multihead.MultiHeadAttention",
      [("        k, v = self.cache_and_share(k, v, cache)                        # (B, H, S, K)\n",
        "        self.cache_and_share(k, v, cache)                        # (B, H, S, K)\n")],
      "The keys and values returned by cache_and_share are discarded, so attention uses only the new "
      "positions' G heads: the cached keys are ignored and grouped heads are never repeated.",
      [r"cache_and_share.*(discard|ignor|thrown|not assign|unused|lost)",
       r"(returned|return value|result)s? .*(discard|ignor|thrown away|not assigned)", r"not (re)?assign",
       r"(cache|cached keys) (is |are )?(ignored|unused|never used)", r"(never|not) repeated"]),
    M("s9_multihead_entropy_mean_heads", "multihead.head_entropy",
      [("    return per_query.mean(dim=(0, 2))                                  # (H,)\n",
        "    return per_query.mean(dim=(0, 1))                                  # (H,)\n")],
      "Averaging over dims (0, 1) removes the batch and head axes instead of the batch and query axes, "
      "so the result has one number per query position instead of one per head.",
      [r"dim\s*=\s*\(0,\s*1\)", r"(averag|mean)\w* (over|across) (the )?(batch and )?heads",
       r"(one|a) (number|value|entropy) per (query|position)", r"(head axis|heads) (is |are )?(averaged|removed|lost)"]),
    M("s9_multihead_entropy_bits", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)\n",
        "    per_query = -(weights * weights.log2()).nan_to_num().sum(dim=-1)            # (B, H, T)\n")],
      "The entropy uses the base-2 logarithm, so it is in bits rather than the nats the docstring asks "
      "for (too large by a factor 1/ln 2).",
      [r"log2", r"\bbits?\b", r"base.?2", r"\bnats?\b", r"ln ?\(?2\)?|1\.44"]),

    # ------------------------------------------------------------------ mlp
    M("s9_mlp_tanh_xor_cube", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        "    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ^ 3)))\n")],
      "x ^ 3 is bitwise XOR in Python and PyTorch, not a power, so it fails on a float tensor; the "
      "cube is x ** 3.",
      [r"\^", r"\bxor\b", r"bitwise", r"(not|isn'?t) (a )?power", r"exponentiation"]),
    M("s9_mlp_erf_parenthesis", "mlp.gelu_erf",
      [("    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n",
        "    return 0.5 * x * (1.0 + torch.erf(x) / math.sqrt(2.0))\n")],
      "The division by sqrt(2) sits outside the erf, so the code computes erf(x)/sqrt(2) instead of "
      "erf(x/sqrt(2)) and the factor is not the normal CDF.",
      [r"erf\(x\)\s*/", r"outside (the )?erf", r"(misplaced|wrong) parenthes", r"erf\(x\s*/\s*(math\.)?sqrt",
       r"(argument|input) of (the )?erf"]),
    M("s9_mlp_grad_density_constant", "mlp.gelu_grad",
      [("    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)\n",
        "    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0) * math.pi           # phi(x) = Phi'(x)\n")],
      "/ math.sqrt(2.0) * math.pi divides by the root of 2 only and then multiplies by pi (left to "
      "right), so the density is scaled by pi/sqrt(2) instead of divided by sqrt(2·pi).",
      [r"sqrt\(2(\.0)?\)\s*\*\s*(math\.)?pi", r"sqrt\(2\s*\*?\s*(math\.)?pi\)|sqrt\(2π\)", r"multipl\w+ by pi",
       r"precedence|parenthes", r"(normali[sz]\w*|density) (constant|factor)"]),
    M("s9_mlp_grad_product_rule_x", "mlp.gelu_grad",
      [("    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi\n",
        "    return cdf + pdf                                                # product rule: 1·Phi + x·phi\n")],
      "The product rule's second term is written phi(x) instead of x·phi(x), so the slope is wrong "
      "everywhere except at x = 1.",
      [r"product rule", r"x\s*\*\s*pdf|x\s*[·*]\s*phi", r"(forg[eo]t|miss|without|drop)\w* (the )?(factor )?x\b",
       r"Phi\s*\+\s*phi|cdf\s*\+\s*pdf"]),
    M("s9_mlp_grad_autograd_on_input", "mlp.gelu_grad",
      [("    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))                   # Phi(x), same shape as x\n"
        "    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)\n"
        "    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi\n",
        "    x.requires_grad_(True)\n"
        "    gelu_erf(x).sum().backward()\n"
        "    return x.grad\n")],
      "The slope is taken with autograd on the caller's own tensor: requires_grad_ changes the input, "
      "gradients accumulate in x.grad so a second call returns twice the slope, and a non-leaf input "
      "or a call under no_grad fails.",
      [r"requires_grad_", r"x\.grad", r"accumulat", r"autograd", r"backward\(\)",
       r"(caller'?s|input) tensor .*(changed|modified|mutated)"]),
    M("s9_mlp_forward_gelu_last", "mlp.MLP",
      [("        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        return self.gelu(self.proj(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n")],
      "GELU is applied after the output projection instead of between the two linear layers, so the "
      "hidden layer is linear and the output itself is squashed.",
      [r"(gelu|non.?linearity|activation) (is )?(applied )?(after|outside|at the end)",
       r"(between|in the middle of) the (two )?(linear|layers)", r"two linear layers (in a row|back.to.back|compose)",
       r"gelu\(self\.proj"]),
    M("s9_mlp_forward_relu", "mlp.MLP",
      [("        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        return self.proj(torch.relu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n")],
      "ReLU is used instead of the module's GELU (self.gelu), so negative pre-activations give exactly "
      "zero and the smooth GELU curve is lost.",
      [r"relu", r"self\.gelu (is )?(never used|not used|unused|ignored)", r"instead of (the )?gelu",
       r"wrong (activation|non.?linearity)"]),

    # ------------------------------------------------------------------ block
    M("s9_block_ln_mean_no_keepdim", "block.layer_norm",
      [("    mean = x.mean(dim=-1, keepdim=True)                        # (..., 1)\n",
        "    mean = x.mean(dim=-1)                        # (..., 1)\n")],
      "Without keepdim the per-token means have shape (...,) and broadcast against the feature axis, "
      "so for batched input x - mean subtracts other tokens' means (or fails).",
      [r"keepdim", r"broadcast\w* (against|along|over|across) the (feature|last|D\b)",
       r"(wrong|another|other) tokens?'? means?", r"trailing axis of size (one|1)"]),
    M("s9_block_ln_if_bias", "block.layer_norm",
      [("    return y + bias if bias is not None else y\n", "    return y + bias if bias else y\n")],
      "`if bias` asks for the truth value of a multi-element tensor, which raises an error, instead of "
      "testing `bias is not None`.",
      [r"truth value|boolean value", r"ambiguous", r"is not None", r"if bias\b"]),
    M("s9_block_dropout_global_rng", "block.dropout",
      [("    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p\n",
        "    keep = torch.rand(x.shape, device=x.device) >= p   # same shape as x, True w.p. 1 - p\n")],
      "The random numbers are drawn from torch's global generator even when a generator is passed, "
      "so a seeded generator does not reproduce the mask.",
      [r"generator (is )?(ignored|unused|never used|not passed|dropped)", r"global (random )?(generator|rng)",
       r"seed\w* .*(not|never) (reproduc|respected|used)", r"(not|never) pass\w* (the )?generator"]),
    M("s9_block_dropout_and_or", "block.dropout",
      [("    if not training or p == 0:\n", "    if not training and p == 0:\n")],
      "`not training and p == 0` skips dropout only when both hold, so outside training with p > 0 "
      "elements are still dropped and rescaled.",
      [r"\band\b (instead of|should be|rather than) \bor\b", r"(eval\w*|not training|inference).*(still|also) (drop|zero|appl)",
       r"training\s*=\s*False", r"boolean (logic|condition)"]),
    M("s9_block_dropout_float_mask", "block.dropout",
      [("    return x * keep / (1 - p)\n", "    return x * keep.float() / (1 - p)\n")],
      "Multiplying by keep.float() promotes half-precision (fp16/bf16) input to float32, so the output "
      "no longer has x's dtype.",
      [r"\.float\(\)", r"promot\w*|upcast\w*", r"\b(fp16|bf16|bfloat16|float16|half)\b",
       r"dtype (changes|is not preserved|not kept|differs)|x'?s dtype"]),
    M("s9_block_prenorm_no_cache", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n",
        "        x = x + self.drop(self.attn(self.ln1(x)))\n")],
      "The cache is not passed to the attention, so during generation with a KV cache the block "
      "attends only over the new tokens and the cache never fills.",
      [r"cache (is )?(not passed|never passed|ignored|dropped|forgotten|missing)",
       r"(forg[eo]t\w*|omit\w*|drop\w*|ignor\w*) (the )?cache", r"only (over )?the new tokens",
       r"self\.attn\(self\.ln1\(x\)\)"]),
    M("s9_block_prenorm_inplace", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n",
        "        x += self.drop(self.attn(self.ln1(x), cache))\n"),
       ("        x = x + self.drop(self.mlp(self.ln2(x)))\n", "        x += self.drop(self.mlp(self.ln2(x)))\n")],
      "`x += ...` adds the sublayer outputs into the caller's tensor in place, so the input stream "
      "(e.g. a hooked earlier layer's output) is overwritten and autograd fails on a leaf input or on "
      "a tensor the norm saved.",
      [r"\+=", r"in.place", r"(overwrit|modif|mutat)\w* (the )?(caller'?s|input)",
       r"modified by an inplace operation|leaf variable"]),
    M("s9_block_postnorm_stale_residual", "block.PostNormBlock",
      [("        x = self.ln1(x + self.drop(self.attn(x, cache)))\n        x = self.ln2(x + self.drop(self.mlp(x)))\n",
        "        h = self.ln1(x + self.drop(self.attn(x, cache)))\n        x = self.ln2(x + self.drop(self.mlp(h)))\n")],
      "After attention the result is kept in h, but the second residual adds the MLP output to the old "
      "x from before attention, so attention's contribution is dropped from the stream.",
      [r"(old|stale|original|previous) x\b", r"residual .*(old|original) (x|input)",
       r"attention('s)? (output|contribution|sublayer) .*(lost|dropped|discarded|thrown away)",
       r"(wrong|stale) variable"]),
    M("s9_block_postnorm_no_return", "block.PostNormBlock",
      [("        x = self.ln2(x + self.drop(self.mlp(x)))\n        return x\n",
        "        x = self.ln2(x + self.drop(self.mlp(x)))\n")],
      "forward has no return statement, so the block returns None.",
      [r"returns? None", r"(no|missing|forg[eo]t\w*( the)?) return", r"(never|doesn'?t|does not) return"]),

    # ------------------------------------------------------------------ model
    M("s9_model_blocks_aliased", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        self.blocks = nn.ModuleList([Block(cfg)] * cfg.n_layers)\n")],
      "[Block(cfg)] * n_layers repeats one Block object n_layers times, so every layer is the same "
      "module with the same weights and the model has one block's parameters run L times.",
      [r"\[Block\(cfg\)\]\s*\*", r"(same|one|single) (block|module|object)( instance)? (repeated|shared|reused|\w+ times)",
       r"shar\w+ (the same )?(weights|parameters)", r"alias", r"list multiplication"]),
    M("s9_model_forward_zip_no_caches", "model.ANDREA",
      [("        for i, block in enumerate(self.blocks):\n            x = block(x, caches[i] if caches else None)              # (B, T, D)\n",
        "        for block, cache in zip(self.blocks, caches or []):\n            x = block(x, cache)              # (B, T, D)\n")],
      "zip stops at the shorter sequence, so without caches (caches or [] is empty) no block runs at "
      "all and the logits come straight from the embeddings.",
      [r"\bzip\b", r"(shorter|shortest|empty) (list|sequence|iterable)", r"no blocks? (runs?|are run|is run|executed)",
       r"(skips?|bypass\w*) (all|every) (the )?blocks?", r"caches or \[\]"]),
    M("s9_model_forward_block_not_assigned", "model.ANDREA",
      [("            x = block(x, caches[i] if caches else None)              # (B, T, D)\n",
        "            block(x, caches[i] if caches else None)              # (B, T, D)\n")],
      "The blocks' outputs are never assigned back to x, so every block's work is thrown away and the "
      "head reads the embeddings.",
      [r"(output|result)s? .*(never|not) (re)?assigned", r"not assigned back", r"thrown away|discarded",
       r"x = block", r"blocks? (have|has) no effect"]),
    M("s9_model_forward_no_start", "model.ANDREA",
      [("        x = self.embed(ids, start)                                   # (B, T, D)\n",
        "        x = self.embed(ids)                                   # (B, T, D)\n")],
      "start is not passed to the embeddings, so with caches the new tokens get the position vectors "
      "of positions 0, 1, ... instead of their real positions after the cache.",
      [r"start (is )?(not passed|never passed|ignored|dropped|forgotten|missing)",
       r"(forg[eo]t\w*|omit\w*|drop\w*|ignor\w*) (the )?start", r"self\.embed\(ids\)",
       r"positions? .*(restart|from (0|zero))"]),
    M("s9_model_count_qkv_ignores_groups", "model.count_parameters",
      [("    qkv_out = (H + 2 * G) * K\n", "    qkv_out = 3 * D\n")],
      "The fused projection is counted as D -> 3D, which ignores grouped key/value heads: with G < H "
      "the key and value blocks are only G·K wide each.",
      [r"3\s*\*\s*D\b", r"(ignor\w+|forg[eo]t\w*) (the )?(G\b|group\w*|kv.?heads|key.?value heads)",
       r"G\s*<\s*H|grouped", r"\(H\s*\+\s*2\s*\*?\s*G\)"]),
    M("s9_model_sample_kth_row_vector", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)\n",
        "        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1]   # (B, 1)\n")],
      "values[:, -1] gives a (B,) vector instead of a (B, 1) column, so comparing it with the (B, V) "
      "logits broadcasts along the vocabulary and rows are cut with other rows' thresholds (or it fails).",
      [r"\[:,\s*-1\](?!:)", r"\(B,\)", r"\(B, ?1\) column|not a column",
       r"broadcast\w* (along|across|over) the (vocab\w*|last|V\b)", r"(other|another|wrong) rows?'? (threshold|k.?th)"]),
    M("s9_model_sample_topk_drops_kth", "model.sample_next",
      [('        logits = logits.masked_fill(logits < kth, float("-inf"))\n',
        '        logits = logits.masked_fill(logits <= kth, float("-inf"))\n')],
      "Masking logits <= kth also removes the k-th largest logit itself (and its ties), so only k - 1 "
      "tokens stay and top_k=1 leaves nothing (NaN probabilities).",
      [r"<=", r"k\s*-\s*1", r"(removes?|mask\w*|drops?) (the )?k.?th", r"off.by.one", r"top_k\s*=\s*1"]),
    M("s9_model_sample_no_generator", "model.sample_next",
      [("    return torch.multinomial(probs, num_samples=1, generator=generator)\n",
        "    return torch.multinomial(probs, num_samples=1)\n")],
      "The generator is not passed to torch.multinomial, so draws come from the global generator and a "
      "seeded generator gives no reproducible samples.",
      [r"generator (is )?(ignored|unused|never used|not passed|dropped)", r"global (random )?(generator|rng)",
       r"seed\w* .*(not|never) (reproduc|respected|used)", r"(not|never) pass\w* (the )?generator"]),
    M("s9_model_kvcache_pos_reset", "model.KVCache",
      [("        self.pos += T\n", "        self.pos = T\n")],
      "self.pos = T sets the counter to the number of new positions instead of adding it, so from the "
      "second update on new keys overwrite old ones and too few positions come back.",
      [r"pos\s*=\s*T\b", r"\+=", r"(instead of|not) (add|increment|advanc)\w*",
       r"overwrit\w+ (the )?(old|earlier|previous)", r"counter (is )?(reset|not advanced)"]),
    M("s9_model_kvcache_whole_buffer", "model.KVCache",
      [("        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos\n",
        "        return self.k, self.v       # (B, G, S, K), S = pos\n")],
      "The whole preallocated buffers are returned, max_len positions including the empty zero slots, "
      "instead of only the self.pos positions filled so far.",
      [r"(whole|entire|full) buffers?", r"max_len", r"(empty|unfilled|zero) (slots|positions)",
       r"(not|without) slic\w+", r":self\.pos"]),

    # ------------------------------------------------------------------ modern
    M("s9_modern_rms_no_keepdim", "modern.rms_norm",
      [("    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)     # one reduction: mean(x²)\n",
        "    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1) + eps)     # one reduction: mean(x²)\n")],
      "Without keepdim the mean of squares has shape (...,) and broadcasts against the feature axis, "
      "so batched tokens are divided by other tokens' RMS (or it fails).",
      [r"keepdim", r"broadcast\w* (against|along|over|across) the (feature|last|D\b)",
       r"(other|another|wrong) tokens?'? (rms|root mean square|norm)", r"trailing axis of size (one|1)"]),
    M("s9_modern_rms_always_float32", "modern.rms_norm",
      [("    wide = torch.promote_types(x.dtype, torch.float32)                    # bf16/fp16 lose the sum of squares\n",
        "    wide = torch.float32                    # bf16/fp16 lose the sum of squares\n")],
      "Always computing in float32 narrows float64 input, so a float64 RMSNorm loses precision (about "
      "1e-7 relative) instead of staying float64.",
      [r"float64 .*(narrow|downcast|float32|precision)", r"(narrow|downcast|truncat)\w* .*float64",
       r"promote_types", r"always (in )?float32|hard.?coded float32", r"(lose|loses|losing) (double )?precision"]),
    M("s9_modern_rms_no_cast_back", "modern.rms_norm",
      [("    return (y * weight.to(wide)).to(x.dtype)\n", "    return y * weight.to(wide)\n")],
      "The result is not cast back to x's dtype, so bf16 or fp16 input comes back as float32.",
      [r"(cast|convert)\w* back", r"\.to\(x\.dtype\)", r"(bf16|bfloat16|fp16|float16|half).*(float32|fp32)",
       r"(returns?|comes back|output) (in |as )?(float32|fp32)", r"x'?s (own )?dtype"]),
    M("s9_modern_hidden_rounds_down", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    return math.ceil(8 * d_model / 3) // multiple_of * multiple_of\n")],
      "Floor-dividing by multiple_of after the ceiling rounds 8D/3 down to a multiple, so D = 4096 "
      "gives 10,752 instead of 11,008.",
      [r"round\w* down", r"\bfloor", r"//", r"10,?752", r"(below|less than|smaller than) 8\s*D\s*/\s*3"]),
    M("s9_modern_hidden_round_nearest", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    return multiple_of * round(8 * d_model / 3 / multiple_of)\n")],
      "round() goes to the nearest multiple, so when 8D/3 lies less than halfway past a multiple "
      "(D = 1000 gives 2,560 instead of 2,816) the width falls short of the budget.",
      [r"round\(", r"nearest", r"(instead of|not|rather than) (math\.)?ceil", r"2,?560", r"half.?way"]),
    M("s9_modern_swiglu_plain_sigmoid", "modern.swiglu",
      [("    return F.silu(gate) * up\n", "    return torch.sigmoid(gate) * up\n")],
      "The gate goes through a plain sigmoid instead of Swish (z·sigmoid(z)), which makes it GLU, not "
      "SwiGLU.",
      [r"sigmoid (instead of|rather than|not) (swish|silu)", r"\bGLU\b",
       r"(missing|forg[eo]t\w*|without) (the )?(factor|multiplication by) (z|the gate)", r"torch\.sigmoid\(gate\)"]),
    M("s9_modern_swiglu_swish_on_value", "modern.swiglu",
      [("    return F.silu(gate) * up\n", "    return F.silu(up) * gate\n")],
      "Swish is applied to the value `up` instead of the gate, swapping the roles of the two inputs.",
      [r"silu\(up\)", r"(swap|switch|revers|exchang)\w* .*(gate|roles|up\b)",
       r"(value|up) (goes|passes|is put) through (swish|silu)", r"swish (of|on) (the )?(value|up)"]),
    M("s9_modern_swiglu_module_args_swapped", "modern.SwiGLU",
      [("        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n",
        "        return self.w_down(self.swiglu(self.w_up(x), self.w_gate(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)\n")],
      "The two projections are passed to swiglu in the wrong order, so w_up's output is used as the "
      "gate and w_gate's as the value.",
      [r"(wrong|swapped|reversed) (argument )?order", r"w_up\S* (as|is used as) (the )?gate",
       r"(swap|switch|revers|exchang)\w* .*(gate|w_up|w_gate|arguments)", r"swiglu\(self\.w_up"]),
    M("s9_modern_kvbytes_query_heads", "modern.kv_cache_bytes",
      [("    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n",
        "    return 2 * cfg.n_layers * batch * cfg.n_heads * S * cfg.d_head * bytes_per_value\n")],
      "The cache is sized with the number of query heads H instead of the key/value heads G, so "
      "grouped heads do not shrink it.",
      [r"n_heads (instead of|rather than|not) (kv_heads|G\b)", r"query heads",
       r"(ignor\w+|forg[eo]t\w*) (the )?(grouping|G\b|kv.?heads|grouped)", r"\bH\b (instead of|rather than) \bG\b"]),
    M("s9_modern_rope_positions_from_one", "modern.rope_frequencies",
      [("    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)              # (T, K/2)\n",
        "    angles = torch.outer(torch.arange(1, T + 1, dtype=torch.float32), inv_freq)              # (T, K/2)\n")],
      "Positions are counted from 1 instead of 0, so every row holds the angles of the next position "
      "and position 0 is turned instead of left as it is.",
      [r"arange\(1,", r"(from|at) (1|one) (instead of|rather than|not) (0|zero)", r"off.by.one",
       r"position 0 .*(turned|rotated|not (the )?identity)", r"shift\w* by one"]),
    M("s9_modern_rope_sin_cos_swapped", "modern.rope_frequencies",
      [("    return angles.cos(), angles.sin()\n", "    return angles.sin(), angles.cos()\n")],
      "The tables are returned as (sin, cos) instead of (cos, sin), so every caller uses the sine as "
      "the cosine.",
      [r"\(sin,\s*cos\)", r"(swap|switch|revers|exchang)\w* .*(sin|cos)", r"(wrong|reversed) order",
       r"sine (as|for|in place of) (the )?cosine"]),
    M("s9_modern_apply_rope_ignores_start", "modern.apply_rope",
      [("    c, s = cos[start:start + T], sin[start:start + T]                 # (T, K/2): positions start .. start + T - 1\n",
        "    c, s = cos[:T], sin[:T]                 # (T, K/2): positions start .. start + T - 1\n")],
      "The first T rows of the tables are used whatever start is, so with a cache the new tokens are "
      "turned as if they sat at positions 0 .. T - 1.",
      [r"cos\[:T\]", r"start (is )?(ignored|unused|not used|never used)", r"(ignor\w+|forg[eo]t\w*|drop\w*) (the )?start",
       r"positions? 0\b", r"(with|under) (a |the )?(kv )?cache"]),
    M("s9_modern_apply_rope_no_cast_back", "modern.apply_rope",
      [("    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)\n",
        "    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)\n")],
      "The rotated result is not cast back to x's dtype, so bf16 or fp16 queries and keys come back "
      "as float32.",
      [r"(cast|convert)\w* back", r"\.to\(x\.dtype\)", r"(bf16|bfloat16|fp16|float16|half).*(float32|fp32)",
       r"(returns?|comes back|output) (in |as )?(float32|fp32)", r"x'?s (own )?dtype"]),
    M("s9_modern_rope_attention_heads_as_start", "modern.rope_attention",
      [("    start = past_k.shape[-2]                                          # S0: positions already cached\n",
        "    start = past_k.shape[1]                                          # S0: positions already cached\n")],
      "past_k.shape[1] is the number of heads, not the number of cached positions, so the new queries "
      "and keys are turned by the angles of the wrong positions.",
      [r"shape\[1\]", r"number of heads|head count|heads? axis", r"(wrong|not the) positions? axis", r"shape\[-2\]"]),
    M("s9_modern_rope_attention_returns_new_only", "modern.rope_attention",
      [("    return attention(q, k_all, v_all), k_all, v_all\n", "    return attention(q, k_all, v_all), k, v\n")],
      "Only the new positions' keys and values are returned instead of k_all and v_all, so the next "
      "call loses everything cached before.",
      [r"k_all", r"(only|just) the new (keys|positions)", r"(cache|past) (is )?(lost|dropped|forgotten)",
       r"returns? k, v\b"]),

    # ------------------------------------------------------------------ kernels
    M("s9_kernels_gelu_mask_le", "kernels.gelu_kernel",
      [("    mask = offs < n_elements                                 # the ragged tail of the last block\n",
        "    mask = offs <= n_elements                                 # the ragged tail of the last block\n")],
      "offs <= n_elements lets one lane past the end through, so the last ragged block reads and "
      "writes element n_elements, one past the end of the arrays.",
      [r"<=", r"off.by.one", r"one (element |lane )?past the end", r"n_elements\b.*(included|written|one past)"]),
    M("s9_kernels_gelu_block_start", "kernels.gelu_kernel",
      [("    offs = pid * BLOCK + tl.arange(0, BLOCK)                 # this program's element indices\n",
        "    offs = pid + tl.arange(0, BLOCK)                 # this program's element indices\n")],
      "The block start is pid instead of pid * BLOCK, so programs overlap and the elements beyond "
      "BLOCK + grid - 1 are never computed.",
      [r"pid\s*\*\s*BLOCK", r"multipl\w+ by BLOCK", r"overlap", r"never (computed|written)|unwritten"]),
    M("s9_kernels_ln_stats_swapped", "kernels.layer_norm_kernel",
      [("    tl.store(mean_ptr + row, mean)\n    tl.store(rstd_ptr + row, rstd)\n",
        "    tl.store(mean_ptr + row, rstd)\n    tl.store(rstd_ptr + row, mean)\n")],
      "The mean is stored in rstd_ptr and 1/std in mean_ptr, so the statistics saved for the backward "
      "pass are swapped.",
      [r"(swap|switch|exchang|revers)\w* .*(mean|rstd)", r"mean_ptr.*rstd|rstd_ptr.*mean",
       r"each other'?s (pointer|buffer|output|place)"]),
    M("s9_kernels_ln_bias_from_weight", "kernels.layer_norm_kernel",
      [("        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n",
        "        y += tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n")],
      "The shift is loaded from w_ptr instead of b_ptr (a copy-paste slip), so gamma is added where "
      "beta should be.",
      [r"w_ptr (instead of|rather than|not) b_ptr", r"copy.?paste", r"gamma (is )?added|adds gamma",
       r"(bias|beta) (is )?(never|not) (loaded|read|used)"]),
    M("s9_kernels_softmax_mask_le", "kernels.softmax_kernel",
      [("    mask = cols < n_cols                                     # the padding lanes of the block\n",
        "    mask = cols <= n_cols                                     # the padding lanes of the block\n")],
      "cols <= n_cols takes one value past the row into the max and the sum (the next row's first "
      "value), so rows come out wrong and one value is stored past each row.",
      [r"<=", r"off.by.one", r"one (element|lane|column|value) past", r"next row'?s first"]),
    M("s9_kernels_softmax_store_x_stride", "kernels.softmax_kernel",
      [("    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)\n",
        "    tl.store(y_ptr + row * x_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)\n")],
      "The output rows are addressed with the input's row stride, so when x is a slice of a wider "
      "matrix the rows of y are written at the wrong places (and past its end).",
      [r"rows stepped by x_row_stride", r"x_row_stride (for|when|in) (the )?(store|storing|output|y\b)", r"(input'?s|x'?s) (row )?stride",
       r"y_row_stride (is )?(unused|ignored|never used)", r"(wrong|same) stride"]),
    M("s9_kernels_flash_acc_not_rescaled", "kernels.flash_attention_kernel",
      [('        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")\n',
        '        acc = acc + tl.dot(p, v, input_precision="ieee")\n')],
      "The accumulated output is not rescaled by exp(m - m_new) when the running max grows, so tiles "
      "summed under an older max are overweighted relative to l.",
      [r"(not|never|without) (re)?scal\w* (the )?(acc|accumulat\w*|output)", r"\balpha\b",
       r"exp\(m\s*-\s*m'?_?new\)", r"online softmax", r"(stale|old|older) max"]),
    M("s9_kernels_flash_ignores_start", "kernels.flash_attention_kernel",
      [("        visible = (cols[None, :] < S) & (cols[None, :] <= start + rows[:, None])\n",
        "        visible = (cols[None, :] < S) & (cols[None, :] <= rows[:, None])\n")],
      "The causal test compares keys with the query's row number instead of its position start + i, "
      "so with cached keys (start > 0) queries cannot see most of the cache.",
      [r"start \+ (i\b|rows?)", r"(ignor\w+|forg[eo]t\w*|drop\w*|without) (the )?start",
       r"(row number|row index) (instead of|rather than|not) (its |the )?position",
       r"cannot see (most of )?the cache|cached keys? .*(invisible|hidden|masked)"]),

    # ------------------------------------------------------------------ bpe
    M("s9_bpe_counts_range_short", "bpe.pair_counts",
      [("        for pair in zip(word, word[1:]):\n            counts[pair] += n\n",
        "        for i in range(len(word) - 2):\n            counts[(word[i], word[i + 1])] += n\n")],
      "range(len(word) - 2) stops one pair early, so the last pair of every word is never counted.",
      [r"len\(word\)\s*-\s*2", r"off.by.one", r"last pair", r"(one|a) pair (too )?(early|short|few)"]),
    M("s9_bpe_counts_set", "bpe.pair_counts",
      [("        for pair in zip(word, word[1:]):\n            counts[pair] += n\n",
        "        for pair in set(zip(word, word[1:])):\n            counts[pair] += n\n")],
      "Taking set() of the word's pairs counts a pair once per word even when it occurs several "
      "times, so (7, 7, 7) seen twice gives 2 instead of 4.",
      [r"\bset\b", r"de.?dup|duplicate", r"once per word", r"(overlapping|repeated) pairs?"]),
    M("s9_bpe_merge_step_one", "bpe.merge_pair",
      [("            out.append(new_id)\n            i += 2\n", "            out.append(new_id)\n            i += 1\n")],
      "After a merge the index moves on by one instead of two, so the second symbol of a merged pair "
      "is used again and (7, 7, 7) becomes (256, 256, 7).",
      [r"i \+= 1", r"(by|only) one (instead of|not) two", r"reus|re-us|used again|used twice", r"\(256,\s*256"]),
    M("s9_bpe_merge_returns_list", "bpe.merge_pair",
      [("    return tuple(out)\n", "    return out\n")],
      "The merged word is returned as a list instead of a tuple, so it never equals the expected tuple "
      "and cannot be used as a dictionary key.",
      [r"\blist\b.*(instead of|not|rather than) (a )?tuple", r"unhashable", r"dict(ionary)? key", r"tuple\(out\)"]),
    M("s9_bpe_best_max_of_keys", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n", "    return max(counts)\n")],
      "max(counts) iterates over the dict's keys, so it returns the largest pair in tuple order and "
      "ignores the counts.",
      [r"max\(counts\)", r"(keys|pairs) (themselves|compared)", r"(ignor\w+|not use|never look\w* at) (the )?counts",
       r"lexicographic|tuple order|largest pair"]),
    M("s9_bpe_best_no_empty_check", "bpe.most_frequent_pair",
      [("    if not counts:\n        return None\n", "")],
      "Without the empty check, min() over an empty tally raises ValueError instead of returning None "
      "when no pair is left.",
      [r"\bempty\b", r"ValueError", r"None (when|if) no pair", r"(missing|forg[eo]t\w*|no) (the )?(empty )?check"]),
    M("s9_bpe_train_counts_once", "bpe.train_bpe",
      [("    for _ in range(n_merges):\n        pair = most_frequent_pair(pair_counts(words))\n",
        "    counts = pair_counts(words)\n    for _ in range(n_merges):\n        pair = most_frequent_pair(counts)\n")],
      "The pairs are counted once before the loop and never recounted after a merge, so the same "
      "winning pair is picked in every round.",
      [r"(once|only one time) (before|outside) (the )?loop", r"(never|not) (re)?count\w* (after|again)|recount",
       r"(stale|outdated) (counts|tally)", r"same pair (is )?(picked|chosen|every)"]),
    M("s9_bpe_train_append_before_id", "bpe.train_bpe",
      [("        new_id = 256 + len(merges)\n", "        merges.append(pair)\n        new_id = 256 + len(merges)\n"),
       ("        words = merged\n        merges.append(pair)\n", "        words = merged\n")],
      "The pair is appended to merges before its id is computed, so the first merge makes token 257 "
      "instead of 256 and every later merge that uses a merged token refers to the wrong id.",
      [r"\b257\b", r"off.by.one", r"append\w* (the pair )?(to merges )?before", r"ids? (is |are )?(shifted|one too (high|large))",
       r"before .*new_id"]),
    M("s9_bpe_train_mutate_while_iterating", "bpe.train_bpe",
      [("        merged = Counter()\n        for word, n in words.items():\n            merged[merge_pair(word, pair, new_id)] += n\n        words = merged\n",
        "        for word, n in words.items():\n            words[merge_pair(word, pair, new_id)] = n\n")],
      "The words dict is changed while it is being iterated (merged words added, old ones kept), which "
      "raises 'dictionary changed size during iteration' or, if it slips through, keeps counting the "
      "unmerged words too.",
      [r"changed size during iteration", r"(mutat|modif|chang)\w* .*(while|during) (iterat|loop)",
       r"(old|unmerged) words (are )?(kept|remain|still)", r"in place"]),
    M("s9_bpe_encode_leftmost_pair", "bpe.encode",
      [("            pair = min(pairs, key=rank.__getitem__)\n", "            pair = pairs[0]\n")],
      "The leftmost mergeable pair is merged first instead of the one learned earliest, so words whose "
      "pairs were learned in another order are encoded differently from training.",
      [r"leftmost|first pair (in|of) the word", r"pairs\[0\]", r"(lowest|earliest|smallest) rank",
       r"(instead of|not|rather than) (by )?(rank|the earliest)"]),
    M("s9_bpe_decode_bytes_of_int", "bpe.decode",
      [("    table = [bytes([b]) for b in range(256)]\n", "    table = [bytes(b) for b in range(256)]\n")],
      "bytes(b) with an int makes b zero bytes rather than the single byte b, so every base token "
      "decodes to a run of NULs.",
      [r"bytes\(b\)", r"zero bytes|null bytes|\bNULs?\b", r"bytes\(\[b\]\)", r"(run|string) of .*zeros?"]),
    M("s9_bpe_decode_per_token", "bpe.decode",
      [('    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")\n',
        '    return "".join(table[i].decode("utf-8", errors="replace") for i in ids)\n')],
      "Each token is decoded on its own, so a UTF-8 character whose bytes are split across tokens "
      "becomes replacement characters instead of the character.",
      [r"(each|every) token (is )?decoded (on its own|separately|individually)",
       r"(split|span\w*) (across|over) (several |two |multiple )?tokens", r"multi.?byte", r"per.token decod"]),

    # ------------------------------------------------------------------ optim
    M("s9_optim_lr_floor_division", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1\n",
        "    progress = min(1.0, (step - warmup_steps) // max(1, max_steps - warmup_steps))   # 0 .. 1\n")],
      "Floor division // makes the progress 0 for every step before max_steps, so the rate stays at lr "
      "and then drops straight to min_lr instead of following the cosine.",
      [r"//", r"(floor|integer) division", r"progress (is |stays )?(0|zero)", r"(jumps?|drops?) (straight|abruptly|at once)"]),
    M("s9_optim_lr_no_cap", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1\n",
        "    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)   # 0 .. 1\n")],
      "Without capping the progress at 1, steps after max_steps continue along the cosine and the rate "
      "climbs back up instead of staying at min_lr.",
      [r"\bcap|clamp|min\(1\.0", r"(climbs?|rises?|goes|comes) back up", r"after max_steps",
       r"progress (exceeds|goes past|above|beyond|over) 1"]),
    M("s9_optim_lr_warmup_le", "optim.lr_at",
      [("    if step < warmup_steps:\n", "    if step <= warmup_steps:\n")],
      "With step <= warmup_steps the warm-up formula also runs at step warmup_steps, giving "
      "lr·(w + 1)/w, more than lr, instead of the start of the cosine.",
      [r"<=", r"off.by.one", r"(exceeds|more than|above|overshoot\w*) lr", r"\(w\s*\+\s*1\)\s*/\s*w|warmup_steps \+ 1"]),
    M("s9_optim_adamw_returns_hats", "optim.adamw_step",
      [("    return param, m, v\n", "    return param, m_hat, v_hat\n")],
      "The bias-corrected m_hat and v_hat are returned as the new state instead of the raw running "
      "averages, so the correction compounds on every later step.",
      [r"m_hat", r"bias.corrected (moments|averages|values|m\b)", r"(instead of|not|rather than) (the )?raw",
       r"compound|corrected again|double.correct"]),
    M("s9_optim_adamw_betas_swapped", "optim.adamw_step",
      [("    beta1, beta2 = betas\n", "    beta2, beta1 = betas\n")],
      "The betas are unpacked in the wrong order, so the gradient's average decays with 0.999 and its "
      "square's with 0.9.",
      [r"beta2, beta1", r"(swap|switch|revers|exchang)\w* .*beta", r"(wrong|reversed) order",
       r"0\.999 .*(gradient|first)|0\.9 .*(square|second)"]),
    M("s9_optim_adamw_eps_in_sqrt", "optim.adamw_step",
      [("    param = param - lr * m_hat / (v_hat.sqrt() + eps)\n", "    param = param - lr * m_hat / (v_hat + eps).sqrt()\n")],
      "eps is added under the square root instead of after it, so the denominator is at least "
      "sqrt(eps) = 1e-4 and small gradients take much smaller steps than AdamW's.",
      [r"(under|inside) the (square )?root", r"sqrt\(eps\)|1e-4", r"\(v_hat \+ eps\)", r"eps (placement|in the wrong place)"]),

    # ------------------------------------------------------------------ inside
    M("s9_inside_stream_cat", "inside.residual_stream",
      [("    return torch.stack(seen)                                           # (L + 1, B, T, D)\n",
        "    return torch.cat(seen)                                           # (L + 1, B, T, D)\n")],
      "torch.cat joins the recorded (B, T, D) outputs along the batch axis, giving ((L + 1)·B, T, D) "
      "instead of a new leading layer axis.",
      [r"torch\.cat", r"(instead of|not|rather than) (torch\.)?stack", r"(new|leading|separate) (layer )?axis",
       r"\(L\s*\+\s*1\)\s*[·*]\s*B"]),
    M("s9_inside_stream_last_handle_only", "inside.residual_stream",
      [("    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]\n",
        "    for m in [model.embed, *model.blocks]:\n        handle = m.register_forward_hook(lambda mod, inp, out: seen.append(out))\n"),
       ("        for handle in handles:\n            handle.remove()\n    return torch.stack(seen)",
        "        handle.remove()\n    return torch.stack(seen)")],
      "Each new handle overwrites the variable, so only the last block's hook is removed and the hooks "
      "on the embeddings and the other blocks stay on the model, recording into old lists on every "
      "later forward.",
      [r"only (the )?last (block'?s )?(hook|handle)", r"hooks? (stay|remain|are left|leak)", r"(overwrit|reassign)\w* .*handle",
       r"(not all|other) hooks? (are )?(not )?removed"]),
    M("s9_inside_patterns_scale_model_width", "inside.attention_patterns",
      [('            scores = (q @ k.transpose(-2, -1) / math.sqrt(K)).masked_fill(future, float("-inf"))\n',
        '            scores = (q @ k.transpose(-2, -1) / math.sqrt(H * K)).masked_fill(future, float("-inf"))\n')],
      "The scores are divided by sqrt(H·K), the model width, instead of sqrt(K), the head width, so the "
      "recomputed weights are flatter than the model's.",
      [r"sqrt\(H\s*\*\s*K\)", r"(model width|d_model|\bD\b) (instead of|rather than|not) (the )?(head width|K\b|d_head)",
       r"sqrt\(D\)", r"flatter|too flat|less peaked"]),
    M("s9_inside_patterns_view_heads", "inside.attention_patterns",
      [("            q, k = (t.view(B, T, H, K).transpose(1, 2) for t in (q, k))   # (B, H, T, K)\n",
        "            q, k = (t.reshape(B, H, T, K) for t in (q, k))   # (B, H, T, K)\n")],
      "Reshaping (B, T, D) straight to (B, H, T, K) fills the heads in memory order, mixing positions "
      "and heads instead of giving each head its own slice of the features.",
      [r"(view|reshape)\(B,\s*H,\s*T,\s*K\)", r"(without|no|missing|forg[eo]t\w*) (the )?transpose",
       r"(mix|scrambl)\w* (the )?(positions|heads)", r"memory order"]),
    M("s9_inside_lens_head_weight", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)\n",
        "        return model.ln_f(stream) @ model.head.weight.T            # (L + 1, B, T, V)\n")],
      "model.head.weight is read directly, which fails for a model with tied embeddings (head is None), "
      "instead of asking model.output_weight().",
      [r"head\.weight", r"\btied\b|tie_embeddings", r"head is None|NoneType", r"output_weight\(\)"]),
    M("s9_inside_lens_no_final_norm", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)\n",
        "        return stream @ model.output_weight().T            # (L + 1, B, T, V)\n")],
      "The stream is multiplied by the output matrix without the final norm model.ln_f, so it is not "
      "read the way the model reads its last layer and the last entry is not the model's logits.",
      [r"ln_f", r"final norm", r"(without|skip\w*|forg[eo]t\w*|no) (the )?(final )?norm\w*",
       r"not the model'?s (own )?logits"]),
    M("s9_inside_induction_same_token", "inside.induction_scores",
      [("    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n",
        "    return patterns[..., t, t - period].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n")],
      "Key t - period is the earlier copy of the same token, not the token after it, so the score "
      "measures duplicate-token attention instead of induction.",
      [r"t\s*-\s*period\b(?!\s*\+)", r"same token", r"(duplicate|previous).?token",
       r"(not|instead of) the (token|position) (after|that followed)", r"off.by.one"]),
    M("s9_inside_induction_chained_index", "inside.induction_scores",
      [("    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n",
        "    return patterns[..., t, :][..., t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n")],
      "Indexing the queries and then the keys in two steps takes every query-key combination (a P'×P' "
      "grid) instead of the matching pairs, so the result keeps an extra axis and averages the wrong weights.",
      [r"(two|separate) (steps|index\w*)", r"grid|every combination|all combinations|outer product",
       r"(matching|paired) (pairs|indices)", r"\]\s*\[\s*\.\.\.", r"extra axis"]),
]

VARIANTS = [
    V("s9_embeddings_v_onehot_einsum", "embeddings.embed_onehot",
      [("    return one_hot @ table                                                  # (B, T, D)\n",
        '    return torch.einsum("...v,vd->...d", one_hot, table)                   # (B, T, D)\n')],
      "The one-hot product written as an einsum over any leading axes; same numbers and gradients."),
    V("s9_attention_v_average_cumsum", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)\n",
        "    counts = torch.arange(1, T + 1, dtype=x.dtype, device=x.device)[:, None]   # (T, 1), a column\n"
        "    return torch.cumsum(x, dim=-2) / counts\n")],
      "Running sum over positions divided by a (T, 1) column of counts made in x's dtype and on x's device."),
    V("s9_attention_v_mask_tril_offset", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n"
        "    j = torch.arange(S, device=device)[None, :]   # (1, S)\n"
        "    return j <= i + (S - T)\n",
        "    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)\n")],
      "tril with diagonal S - T keeps exactly j <= i + S - T, on the requested device."),
    V("s9_attention_v_softmax_max_values", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n",
        "    z = scores - scores.max(dim=-1, keepdim=True).values\n")],
      "Row maximum taken with .max(...).values instead of .amax; the shift cancels, values and gradients agree."),
    V("s9_multihead_v_split_unflatten", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)\n")],
      "unflatten the feature axis to (H, K), then permute heads in front of positions."),
    V("s9_multihead_v_entropy_entr", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)\n",
        "    per_query = torch.special.entr(weights).sum(dim=-1)            # (B, H, T)\n")],
      "torch.special.entr gives -w·log w with 0 at w = 0, in nats."),
    V("s9_mlp_v_gelu_tanh_functional", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        '    return torch.nn.functional.gelu(x, approximate="tanh")\n')],
      "PyTorch's own tanh-approximate GELU, the same formula, in x's dtype, differentiable."),
    V("s9_block_v_ln_var_correction0", "block.layer_norm",
      [("    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased\n",
        "    var = x.var(dim=-1, keepdim=True, correction=0)         # (..., 1), biased\n")],
      "The biased variance via var(correction=0), kept as a trailing axis."),
    V("s9_model_v_kvcache_narrow", "model.KVCache",
      [("        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer\n"
        "        self.v[:, :, self.pos:self.pos + T] = v\n"
        "        self.pos += T\n"
        "        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos\n",
        "        self.k.narrow(2, self.pos, T).copy_(k)\n"
        "        self.v.narrow(2, self.pos, T).copy_(v)\n"
        "        self.pos += T\n"
        "        return self.k.narrow(2, 0, self.pos), self.v.narrow(2, 0, self.pos)\n")],
      "narrow(...).copy_ writes into the buffer in place and narrow returns views of the filled part."),
    V("s9_model_v_sample_kthvalue", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)\n",
        "        kth = -torch.kthvalue(-logits, min(top_k, logits.shape[-1]), dim=-1, keepdim=True).values   # (B, 1)\n")],
      "The k-th largest logit as minus the k-th smallest of the negated logits, kept as a (B, 1) column."),
    V("s9_modern_v_hidden_integer_ceil", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    return -(-8 * d_model // (3 * multiple_of)) * multiple_of\n")],
      "Ceiling division in integers only, -(-a // b), with no float rounding at all."),
    V("s9_modern_v_rope_rotate_half", "modern.apply_rope",
      [("    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)           # pair (i, i + K/2)\n"
        "    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)\n",
        "    xw = x.to(wide)\n"
        "    rotated = torch.cat([-xw[..., half:], xw[..., :half]], dim=-1)   # rotate_half\n"
        "    return (xw * torch.cat([c, c], dim=-1) + rotated * torch.cat([s, s], dim=-1)).to(x.dtype)\n")],
      "The Hugging Face rotate_half form, x·cos + rotate_half(x)·sin, computed wide and cast back."),
    V("s9_kernels_v_gelu_tanh_from_exp", "kernels.gelu_kernel",
      [("    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0\n",
        "    tanh_z = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)                  # tanh without tl.tanh\n")],
      "tanh(z) = 1 - 2/(exp(2z) + 1); exp overflow to inf gives exactly 1, masks and offsets unchanged."),
    V("s9_bpe_v_merge_slice_assign", "bpe.merge_pair",
      [("    out, i = [], 0\n"
        "    while i < len(word):\n"
        "        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:\n"
        "            out.append(new_id)\n"
        "            i += 2\n"
        "        else:\n"
        "            out.append(word[i])\n"
        "            i += 1\n"
        "    return tuple(out)\n",
        "    out = list(word)\n"
        "    i = 0\n"
        "    while i < len(out) - 1:\n"
        "        if (out[i], out[i + 1]) == pair:\n"
        "            out[i:i + 2] = [new_id]          # the merged symbol is never looked at again\n"
        "        i += 1\n"
        "    return tuple(out)\n")],
      "Merges in place in a list copy by slice assignment; after a merge the scan moves past the new id, "
      "so it gives the same left-to-right result."),
    V("s9_bpe_v_decode_bytearray", "bpe.decode",
      [('    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")\n',
        "    out = bytearray()\n"
        "    for i in ids:\n"
        "        out.extend(table[i])                 # grow one mutable buffer\n"
        '    return out.decode("utf-8", errors="replace")\n')],
      "The bytes gathered into one bytearray, then the whole buffer decoded at once; same text."),
    V("s9_optim_v_adamw_step_size", "optim.adamw_step",
      [("    m_hat = m / (1 - beta1 ** step)                            # bias correction: both started at 0\n"
        "    v_hat = v / (1 - beta2 ** step)\n"
        "    param = param * (1 - lr * weight_decay)                    # decoupled: not through the gradient\n"
        "    param = param - lr * m_hat / (v_hat.sqrt() + eps)\n",
        "    step_size = lr / (1 - beta1 ** step)                       # torch.optim.AdamW's arrangement\n"
        "    denom = v.sqrt() / math.sqrt(1 - beta2 ** step) + eps\n"
        "    param = param * (1 - lr * weight_decay)\n"
        "    param = param - step_size * m / denom\n")],
      "Bias corrections folded into a step size and the denominator, as torch.optim.AdamW does; returns raw m, v."),
    V("s9_inside_v_induction_diagonal", "inside.induction_scores",
      [("    t = torch.arange(period, patterns.shape[-2], device=patterns.device)    # the queries of the repeat\n"
        "    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)\n",
        "    diag = torch.diagonal(patterns, offset=1 - period, dim1=-2, dim2=-1)   # key = query - period + 1\n"
        "    return diag[..., 1:].mean(dim=(1, 3))                              # queries period .. T - 1\n")],
      "The wanted weights lie on one diagonal below the main one; drop its first entry (query period - 1)."),
]
