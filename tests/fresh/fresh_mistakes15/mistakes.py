"""Fresh mistakes in the pieces of solutions/*.py, written as a learner would make them, without
reading the course's own lists of typical mistakes; and unusual but correct variants (the entries:
tests/fresh/fresh_entries.py). tools/fresh_mistakes.py runs them."""
from fresh_entries import M, V

MISTAKES = [
    # ------------------------------------------------------------------ embeddings
    M("s15_embeddings_index_select_2d", "embeddings.embed_lookup",
      [("\n    return table[ids]\n", "\n    return torch.index_select(table, 0, ids)\n")],
      "Uses torch.index_select(table, 0, ids), which only accepts a 1-D index: a (B, T) batch of ids raises "
      "instead of giving (B, T, D).",
      [r"index_select", r"1-?d (index|tensor|ids)", r"(one|single)[- ]dimensional (index|ids)",
       r"flatten\w* (the )?ids"]),
    M("s15_embeddings_lookup_squeeze", "embeddings.embed_lookup",
      [("\n    return table[ids]\n", "\n    return table[ids].squeeze()\n")],
      "Adds .squeeze() with no dim after the lookup: every axis of size one (a batch of one sequence, a single "
      "token, D = 1) disappears from the (B, T, D) result.",
      [r"squeeze", r"size[- ](one|1) ax[ie]s", r"(drops|removes|loses) (the |an? )?(batch|singleton|size-1)"]),
    M("s15_embeddings_onehot_float32", "embeddings.embed_onehot",
      [("one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)  # (B, T, V)",
        "one_hot = F.one_hot(ids, num_classes=table.shape[0]).float()  # (B, T, V)")],
      "Converts the one-hot vectors with .float() instead of to the table's dtype: a float64 or half table meets "
      "a float32 matrix and the product fails with a dtype error.",
      [r"\.float\(\)", r"float32", r"table'?s? (own )?(dtype|floating[- ]point type)", r"dtype mismatch"]),
    M("s15_embeddings_positions_slice_end", "embeddings.add_positions",
      [("return tok + position_table[start:start + T]    # (T, D) broadcasts over B",
        "return tok + position_table[start:T]    # (T, D) broadcasts over B")],
      "Slices position_table[start:T] instead of [start:start + T]: with a non-zero start the block holds only "
      "T - start rows (or none), so the addition fails (or one row is broadcast over every position).",
      [r"start ?: ?T\b", r"start ?\+ ?T", r"T ?- ?start", r"(end|stop) of the slice"]),
    M("s15_embeddings_positions_inplace", "embeddings.add_positions",
      [("    T = tok.shape[1]\n    return tok + position_table[start:start + T]",
        "    T = tok.shape[1]\n    tok += position_table[start:start + T]\n    return tok")],
      "Adds the positions in place with tok += ...: the caller's token tensor is overwritten, and a tok that is a "
      "leaf requiring grad makes the in-place addition raise.",
      [r"in[- ]place", r"\+=", r"(overwrit|mutat|modif)\w* (the )?(caller|input|tok)"]),
    M("s15_embeddings_cosine_torch_dot", "embeddings.cosine_similarity",
      [("    dot = (u * v).sum(-1)\n", "    dot = torch.dot(u, v)\n")],
      "Uses torch.dot for the dot product, which only takes two 1-D vectors: batched (..., D) inputs, or a (V, D) "
      "table against one (D,) query, raise.",
      [r"torch\.dot", r"1-?d (vectors|tensors|inputs)", r"(two )?one-dimensional"]),
    M("s15_embeddings_cosine_python_max", "embeddings.cosine_similarity",
      [("    return dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)\n",
        "    return dot / max(u.norm(dim=-1) * v.norm(dim=-1), eps)\n")],
      "Floors the denominator with Python's built-in max(..., eps): a tensor of several norms compared with a "
      "number has no single truth value, so batched inputs raise (only a single pair of vectors works).",
      [r"(built-?in|python'?s?) max", r"\bmax\(", r"ambiguous|truth value|boolean value"]),
    M("s15_embeddings_nearest_argsort", "embeddings.nearest_tokens",
      [("    return torch.topk(scores, k).indices              # (k,), the largest score first",
        "    return scores.argsort()[:k]                       # (k,), the largest score first")],
      "Takes scores.argsort()[:k]: argsort sorts in ascending order, so these are the k least similar rows, "
      "least similar first.",
      [r"argsort", r"ascending", r"least similar", r"descending"]),
    M("s15_embeddings_module_no_start", "embeddings.Embeddings",
      [("        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)\n",
        "        x = add_positions(embed_lookup(self.token_table, ids), self.position_table)\n")],
      "Calls add_positions without start: with a KV cache the new tokens get the position vectors of positions "
      "0, 1, ... instead of their own.",
      [r"(without|forg[eo]t\w*|ignor\w*|drop\w*|never pass\w*|not pass\w*|missing) (the )?start",
       r"start (is|was) (not|never) passed", r"positions? (from|at) 0"]),
    # ------------------------------------------------------------------ attention
    M("s15_attention_average_past_cumsum_cols", "attention.average_past",
      [("    T = x.shape[-2]\n    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)",
        "    T = x.shape[-2]\n    return torch.cumsum(x, dim=-2) / torch.arange(1, T + 1, device=x.device)")],
      "Divides the running sum by torch.arange(1, T + 1) laid along the last axis: the counts line up with the D "
      "features instead of the T positions, so it fails when D != T and divides the wrong entries when D == T.",
      [r"\[:, ?None\]", r"(last|feature) ax[ie]s", r"unsqueeze", r"(counts?|arange).{0,60}(column|positions? axis|features)"]),
    M("s15_attention_avg_weights_columns", "attention.causal_average_weights",
      [("    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count",
        "    return w / torch.arange(1, T + 1)                # each row divided by its count")],
      "Divides the triangle by torch.arange(1, T + 1), which broadcasts along the columns: entry (i, j) becomes "
      "1/(j + 1), so the rows no longer sum to 1.",
      [r"column", r"1 ?/ ?\(j ?\+ ?1\)", r"rows? (do not|don't|no longer|does not|doesn't) sum to (1|one)", r"\[:, ?None\]"]),
    M("s15_attention_softmax_weights_float_mask", "attention.causal_softmax_weights",
      [("    future = torch.tril(torch.ones(T, T)) == 0       # (T, T), True above the diagonal",
        "    future = torch.triu(torch.ones(T, T), diagonal=1)   # (T, T), True above the diagonal")],
      "Passes the float 0/1 matrix from torch.triu as the mask: masked_fill needs a boolean mask, so the call raises.",
      [r"bool", r"float (0/1 )?(mask|matrix|tensor)", r"== ?(1|0)"]),
    M("s15_attention_softmax_weights_where_swapped", "attention.causal_softmax_weights",
      [('    scores = torch.zeros(T, T).masked_fill(future, float("-inf"))',
        '    scores = torch.where(future, 0.0, float("-inf"))')],
      "Writes torch.where(future, 0.0, -inf) with the two values swapped: the past and the diagonal get -inf and "
      "the future 0, so each row attends only to the future and the last row is all -inf (NaN).",
      [r"swap", r"where.{0,60}(order|arguments|reversed|backwards)", r"(past|allowed|diagonal).{0,40}-?inf",
       r"only (to )?the future"]),
    M("s15_attention_scores_transpose01", "attention.attention_scores",
      [("\n    return q @ k.transpose(-2, -1)\n", "\n    return q @ k.transpose(0, 1)\n")],
      "Transposes axes 0 and 1 of the keys instead of the last two: right for a single (S, K) matrix, but with "
      "batch or head axes in front it swaps the wrong axes, so the product fails or mixes sequences.",
      [r"transpose\(0, ?1\)", r"last two", r"-2, ?-1", r"(batch|head|leading) ax[ie]s"]),
    M("s15_attention_scale_precedence", "attention.scale_scores",
      [("\n    return scores / math.sqrt(d_head)\n", "\n    return scores / d_head ** 1/2\n")],
      "Writes scores / d_head ** 1/2, which Python reads as (scores / d_head) / 2: it divides by K/2 instead of "
      "sqrt(K).",
      [r"precedence", r"\*\* ?1 ?/ ?2", r"(K|d_head) ?/ ?2", r"\*\* ?0?\.5|\*\* ?\(1 ?/ ?2\)"]),
    M("s15_attention_mask_float_tril", "attention.causal_mask",
      [("    S = T if S is None else S\n    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n"
        "    j = torch.arange(S, device=device)[None, :]   # (1, S)\n    return j <= i + (S - T)\n",
        "    S = T if S is None else S\n    return torch.ones(T, S, device=device).tril(diagonal=S - T)\n")],
      "Returns torch.ones(...).tril(diagonal=S - T): the right pattern, but a float 0/1 matrix instead of a "
      "boolean one, so ~mask and masked_fill with it fail.",
      [r"bool", r"float (0/1 )?(mask|matrix|ones|tensor)", r"dtype ?= ?torch\.bool"]),
    M("s15_attention_mask_device", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n    j = torch.arange(S, device=device)[None, :]   # (1, S)",
        "    i = torch.arange(T)[:, None]   # (T, 1)\n    j = torch.arange(S)[None, :]   # (1, S)")],
      "Builds the positions with torch.arange without device=device: the mask is always on the CPU, so a mask asked "
      "for on another device (a GPU, or meta) comes back on the wrong one.",
      [r"device ?= ?device", r"(without|no|missing|forg[eo]t\w*|ignor\w*) (the )?device", r"(always|stays?|only) on (the )?cpu",
       r"wrong device"]),
    M("s15_attention_apply_mask_inplace", "attention.apply_causal_mask",
      [('    return scores.masked_fill(~allowed, float("-inf"))\n',
        '    return scores.masked_fill_(~allowed, float("-inf"))\n')],
      "Uses masked_fill_ with the trailing underscore: it overwrites the caller's scores in place (and raises for "
      "a leaf that requires grad) instead of returning a new tensor.",
      [r"masked_fill_", r"in[- ]place", r"(overwrit|mutat|modif)\w* (the )?(caller|input|scores)"]),
    M("s15_attention_apply_mask_first_axes", "attention.apply_causal_mask",
      [("    T, S = scores.shape[-2:]\n    allowed", "    T, S = scores.shape[:2]\n    allowed")],
      "Reads T and S from scores.shape[:2], the first two sizes: right for a plain (T, S) matrix, wrong for "
      "batched (..., T, S) scores, where it builds a mask of the batch sizes.",
      [r"shape\[:2\]", r"(first|leading) two", r"last two"]),
    M("s15_attention_softmax_max_pair", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n",
        "    z = scores - torch.max(scores, dim=-1, keepdim=True)\n")],
      "Subtracts torch.max(scores, dim=-1, keepdim=True), which with a dim returns a (values, indices) pair, not a "
      "tensor, so the subtraction raises.",
      [r"\.values", r"values,? (and )?indices", r"named ?tuple", r"amax"]),
    M("s15_attention_softmax_global_max", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n", "    z = scores - scores.max()\n")],
      "Subtracts the single largest score of the whole tensor instead of each row's own maximum: a row far below "
      "the global maximum underflows to exp = 0 everywhere and gives 0/0 = NaN.",
      [r"(global|whole|entire|overall|single) (tensor'?s? )?(max|largest)", r"(each|per|its own) row'?s? (own )?max",
       r"underflow", r"max\(\)"]),
    M("s15_attention_softmax_numpy_exp", "attention.softmax",
      [("    e = z.exp()\n", "    import numpy as np\n    e = np.exp(z)\n")],
      "Exponentiates with NumPy's np.exp: the tensor goes through NumPy, which refuses a tensor that requires grad "
      "(or lives on a GPU), so the softmax cannot be trained through.",
      [r"numpy|np\.exp", r"requires.?grad"]),
    M("s15_attention_weighted_sum_einsum_nobatch", "attention.weighted_sum",
      [("\n    return weights @ v\n", '\n    return torch.einsum("ts,sk->tk", weights, v)\n')],
      "Writes the product as torch.einsum('ts,sk->tk') without '...': it only accepts plain 2-D matrices, so "
      "batched or multi-head weights raise.",
      [r"einsum", r"\.\.\.|ellipsis", r"(batch|head|leading) ax[ie]s"]),
    M("s15_attention_attention_scale_T", "attention.attention",
      [("    scores = scale_scores(attention_scores(q, k), q.shape[-1])\n",
        "    scores = scale_scores(attention_scores(q, k), q.shape[-2])\n")],
      "Passes q.shape[-2], the number of queries T, as the head width: the scores are divided by sqrt(T) instead "
      "of sqrt(K).",
      [r"shape\[-2\]", r"sqrt\(T\)", r"(number of queries|sequence length).{0,40}(instead|rather|not)"]),
    M("s15_attention_attention_mask_discarded", "attention.attention",
      [("    if causal:\n        scores = apply_causal_mask(scores)\n    return weighted_sum",
        "    if causal:\n        apply_causal_mask(scores)\n    return weighted_sum")],
      "Calls apply_causal_mask(scores) without assigning the result: it returns a new tensor and leaves scores "
      "untouched, so the mask is never applied.",
      [r"(discard|ignor|throw\w* away|drop)\w* (the )?(result|return)", r"scores ?= ?apply_causal_mask",
       r"without (re)?assign\w*", r"returns a new tensor",
       r"(result|return value).{0,40}(not (used|kept|assigned)|never used|lost)", r"(not|never) (assigned|reassigned)"]),
    M("s15_attention_head_wq_for_keys", "attention.AttentionHead",
      [("        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)\n",
        "        return attention(self.w_q(x), self.w_q(x), self.w_v(x), causal=True)\n")],
      "Computes the keys with self.w_q instead of self.w_k (a copy-paste slip): queries and keys are the same "
      "projection and w_k is never used.",
      [r"w_q.{0,30}(keys|twice|for k)", r"w_k.{0,30}(never|not|unused)", r"copy[- ]paste",
       r"same projection (for|as)"]),
    # ------------------------------------------------------------------ multihead
    M("s15_multihead_split_interleaved", "multihead.split_heads",
      [("\n    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "\n    return x.view(B, T, HK // n_heads, n_heads).permute(0, 3, 1, 2)\n")],
      "Views the features as (K, H) instead of (H, K) before moving the head axis forward: the shape is right, but "
      "head h gets the strided features h, h + H, h + 2H, ... instead of its own contiguous slice.",
      [r"\(K, ?H\)|HK ?// ?n_heads, ?n_heads", r"interleav|strided", r"contiguous (slice|block)",
       r"(every|each) H-?th feature"]),
    M("s15_multihead_split_unpack_order", "multihead.split_heads",
      [("    B, T, HK = x.shape\n    return x.view(B, T, n_heads", "    T, B, HK = x.shape\n    return x.view(B, T, n_heads")],
      "Unpacks x.shape as T, B, HK, so the batch and position sizes trade names: view silently regroups the "
      "sequences, and the result has shape (T, H, B, K) whenever B != T.",
      [r"T, ?B, ?HK", r"(unpack\w*|order of).{0,40}shape", r"(batch|\bB\b) and (T|position).{0,30}(swap|trade|switch|exchang|confus)"]),
    M("s15_multihead_merge_view_after_transpose", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n", "    return x.transpose(1, 2).view(B, T, H * K)\n")],
      "Uses .view after the transpose: the transposed tensor is not contiguous, so view refuses to fuse the head "
      "and width axes and raises (except in corner cases such as H = 1 or T = 1).",
      [r"\.view", r"contiguous", r"reshape"]),
    M("s15_multihead_mha_chunk", "multihead.MultiHeadAttention",
      [("        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)   # (B, T, H·K), (B, T, G·K) x2",
        "        q, k, v = self.qkv(x).chunk(3, dim=-1)   # (B, T, H·K), (B, T, G·K) x2")],
      "Cuts the fused projection with chunk(3), three equal parts: right only when G = H; with grouped key/value "
      "heads the queries get part of the keys and the keys part of the values.",
      [r"chunk", r"equal (parts|pieces|thirds|sizes)", r"G ?(<|!=|≠) ?H|grouped"]),
    M("s15_multihead_mha_skip_cache", "multihead.MultiHeadAttention",
      [("        k, v = self.cache_and_share(k, v, cache)                        # (B, H, S, K)\n", "")],
      "Never calls self.cache_and_share: the KV cache is ignored during generation (each step sees only its new "
      "tokens), and with G < H the key/value heads are not repeated for the query heads.",
      [r"cache_and_share", r"(kv )?cache (is )?(ignored|never (used|updated|filled|read))", r"repeat\w*.{0,40}(key|value|kv)"]),
    M("s15_multihead_mha_residual_inside", "multihead.MultiHeadAttention",
      [("        return self.proj(merge_heads(y))                               # (B, T, D)",
        "        return self.proj(merge_heads(y)) + x                           # (B, T, D)")],
      "Adds the input x to the output inside the attention module: the residual connection belongs to the block, "
      "which adds x again, so the stream is counted twice.",
      [r"\+ ?x\b", r"residual (connection )?(inside|in the attention|belongs)", r"(added|counted) twice"]),
    M("s15_multihead_entropy_log_nan", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)",
        "    per_query = -(weights * weights.log()).sum(dim=-1)            # (B, H, T)")],
      "Computes w·log w directly: a masked key with weight exactly 0 gives 0·(-inf) = NaN, so the entropy of any "
      "head with a masked future key is NaN.",
      [r"0 ?[·*x] ?(log ?\(?0|\(?-inf)", r"nan.{0,40}(zero|0) weight|(zero|0)[- ]weights?.{0,60}nan", r"xlogy|entr"]),
    M("s15_multihead_entropy_wrong_axes", "multihead.head_entropy",
      [("    return per_query.mean(dim=(0, 2))                                  # (H,)",
        "    return per_query.mean(dim=(0, 1))                                  # (H,)")],
      "Averages over axes (0, 1), the batch and the heads, instead of the batch and the queries: the result has "
      "one number per query position, (T,), not one per head.",
      [r"dim ?= ?\(0, ?1\)", r"(over|averag\w*) (the )?heads", r"\(T,\)"]),
    M("s15_multihead_entropy_bits", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)",
        "    per_query = -(weights * torch.log2(weights)).nan_to_num(0.0).sum(dim=-1)   # (B, H, T)")],
      "Uses the base-2 logarithm, so the entropies are in bits instead of nats: every value is 1/ln 2 ≈ 1.44 "
      "times too large.",
      [r"log2|base[- ]?2", r"\bbits\b", r"\bnats\b", r"1\.44|ln ?2"]),

    # ------------------------------------------------------------------ mlp
    M("s15_mlp_gelu_math_tanh", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        "    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n")],
      "Uses math.tanh, Python's scalar function: it only works on a one-element tensor, so any real (B, T, F) "
      "input raises.",
      [r"math\.tanh", r"(scalar|python'?s?) (function|tanh)", r"(one|single)[- ]element"]),
    M("s15_mlp_gelu_cube_unscaled", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        "    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * x + 0.044715 * x ** 3))\n")],
      "Drops the parentheses around x + 0.044715·x³: only x is multiplied by sqrt(2/pi) and the cubic term "
      "enters the tanh unscaled.",
      [r"parenthes", r"(cubic|cube|x ?\*\* ?3|x³).{0,40}(scal|sqrt|multipl)", r"precedence"]),
    M("s15_mlp_erf_paren", "mlp.gelu_erf",
      [("    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))\n",
        "    return 0.5 * x * (1.0 + torch.erf(x) / math.sqrt(2.0))\n")],
      "Closes the erf's parenthesis too early: it computes erf(x) / sqrt(2) instead of erf(x / sqrt(2)).",
      [r"erf\(x\) ?/", r"parenthes", r"(inside|into) (the )?erf"]),
    M("s15_mlp_grad_no_x", "mlp.gelu_grad",
      [("    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi",
        "    return cdf + pdf                                                    # product rule: 1·Phi + x·phi")],
      "Forgets the factor x in the product rule: returns Phi(x) + phi(x) instead of Phi(x) + x·phi(x).",
      [r"product rule", r"x ?[·*] ?(phi|pdf|density)", r"(factor|times) x\b"]),
    M("s15_mlp_grad_pi_precedence", "mlp.gelu_grad",
      [("    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)",
        "    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0) * math.pi           # phi(x) = Phi'(x)")],
      "Writes / math.sqrt(2.0) * math.pi, which multiplies by pi instead of dividing by sqrt(2·pi): the density "
      "term is 2π times too big.",
      [r"sqrt\(2(\.0)? ?\* ?(math\.)?pi", r"\* ?math\.pi|times pi|multipl\w* by pi", r"precedence|parenthes"]),
    M("s15_mlp_grad_autograd_accumulates", "mlp.gelu_grad",
      [("    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))                   # Phi(x), same shape as x\n"
        "    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)\n"
        "    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi",
        "    x.requires_grad_(True)\n    gelu_erf(x).sum().backward()\n    return x.grad")],
      "Gets the slope from autograd on the caller's own tensor: it switches on requires_grad for x, and x.grad "
      "accumulates, so a second call on the same x returns twice the slope (and a non-leaf x or a no_grad "
      "context breaks it).",
      [r"accumulat", r"x\.grad", r"requires_grad", r"backward"]),
    M("s15_mlp_module_gelu_first", "mlp.MLP",
      [("        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)",
        "        return self.proj(self.fc(self.gelu(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)")],
      "Applies GELU to the input before the first linear layer instead of between the two: the two linear maps "
      "compose into one, so the hidden layer adds no non-linearity.",
      [r"(gelu|non-?linearity).{0,40}(before|on the input|first)", r"gelu\(x\)", r"between (the )?(two )?(linear|layers)"]),

    # ------------------------------------------------------------------ block
    M("s15_block_ln_unbiased_var", "block.layer_norm",
      [("    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased",
        "    var = x.var(dim=-1, keepdim=True)                          # (..., 1), biased")],
      "Uses x.var(dim=-1), which by default divides by D - 1 (the unbiased estimate), instead of the biased "
      "variance over D.",
      [r"unbiased", r"D ?- ?1", r"correction", r"bessel"]),
    M("s15_block_ln_bias_truthiness", "block.layer_norm",
      [("    y = y * weight\n    return y + bias if bias is not None else y\n",
        "    y = y * weight\n    return y + bias if bias else y\n")],
      "Tests the bias with `if bias`, the truth value of a tensor: a (D,) bias with more than one element raises "
      "instead of being checked against None.",
      [r"is not none|is none", r"truth value|ambiguous", r"if bias\b"]),
    M("s15_block_ln_ternary_precedence", "block.layer_norm",
      [("    y = y * weight\n    return y + bias if bias is not None else y\n",
        "    return y * weight + bias if bias is not None else y\n")],
      "Folds the gain into the conditional expression: `y * weight + bias if bias is not None else y` returns the "
      "unscaled y when there is no bias, so gamma is skipped for a bias-free LayerNorm.",
      [r"(gamma|weight|gain).{0,40}(skip|ignor|not applied|missing|dropp|lost|never)", r"conditional|ternary",
       r"precedence", r"(bias-free|no bias|without (a )?bias|bias is none)"]),
    M("s15_block_dropout_no_generator", "block.dropout",
      [("    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p",
        "    keep = torch.rand(x.shape, device=x.device) >= p   # same shape as x, True w.p. 1 - p")],
      "Draws the random numbers without passing the generator: a seeded generator has no effect and the mask comes "
      "from torch's global random state.",
      [r"generator", r"\bseed"]),
    M("s15_block_dropout_and", "block.dropout",
      [("    if not training or p == 0:\n        return x\n    if p == 1:",
        "    if not training and p == 0:\n        return x\n    if p == 1:")],
      "Writes `not training and p == 0` instead of `or`: in evaluation mode with p > 0 elements are still dropped "
      "and rescaled.",
      [r"\band\b.{0,30}\bor\b|\bor\b.{0,30}\band\b", r"(eval\w*|not training|inference).{0,40}(still|drop)",
       r"training ?= ?false"]),
    M("s15_block_dropout_float_mask", "block.dropout",
      [("    return x * keep / (1 - p)\n", "    return x * keep.float() / (1 - p)\n")],
      "Turns the mask into float32 before multiplying: a float16 or bfloat16 x is promoted, so the result comes "
      "back as float32 instead of in x's dtype.",
      [r"\.float\(\)", r"float32", r"promot|upcast", r"x'?s dtype|same dtype"]),
    M("s15_block_block_normed_residual", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n        x = x + self.drop(self.mlp(self.ln2(x)))\n        return x",
        "        x = self.ln1(x)\n        x = x + self.drop(self.attn(x, cache))\n        x = x + self.drop(self.mlp(self.ln2(x)))\n        return x")],
      "Normalises the stream itself with ln1 and adds the attention output to the normalised x: the residual path "
      "is no longer the raw stream.",
      [r"(normali[sz]ed|ln1\(x\)).{0,40}(residual|stream|added)", r"raw (residual|stream)",
       r"residual.{0,40}(normali[sz]ed|ln1)"]),
    M("s15_block_block_no_cache", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n", "        x = x + self.drop(self.attn(self.ln1(x)))\n")],
      "Calls self.attn without the cache: during generation the cached keys and values are never stored or read, "
      "so each new token sees only itself.",
      [r"(without|not pass\w*|forg[eo]t\w*|drop\w*|never pass\w*|missing|no) (the )?cache", r"self\.attn\(self\.ln1\(x\)\)",
       r"cache (is )?never (passed|given)"]),
    M("s15_block_block_stale_input", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n        x = x + self.drop(self.mlp(self.ln2(x)))\n        return x",
        "        h = x\n        x = x + self.drop(self.attn(self.ln1(h), cache))\n        x = x + self.drop(self.mlp(self.ln2(h)))\n        return x")],
      "Feeds the MLP the stream as it was before attention (h), not the updated x: the two sublayers run side by "
      "side on the same input instead of one after the other.",
      [r"(before|without) (the )?attention'?s? (update|output)", r"(stale|old|original) (stream|x|input)",
       r"parallel|side by side"]),
    M("s15_block_postnorm_sublayer_norm", "block.PostNormBlock",
      [("        x = self.ln1(x + self.drop(self.attn(x, cache)))\n        x = self.ln2(x + self.drop(self.mlp(x)))",
        "        x = x + self.ln1(self.drop(self.attn(x, cache)))\n        x = x + self.ln2(self.drop(self.mlp(x)))")],
      "Normalises each sublayer's output before adding it instead of normalising the sum: the stream itself is "
      "never normalised, which is neither post-norm nor pre-norm.",
      [r"(normali[sz]\w*|ln\d?) (the )?(whole )?sum", r"output.{0,30}(before|instead).{0,30}(add|sum)",
       r"stream (is )?never normali"]),
    M("s15_block_postnorm_prenorm_attn", "block.PostNormBlock",
      [("        x = self.ln1(x + self.drop(self.attn(x, cache)))\n",
        "        x = self.ln1(x + self.drop(self.attn(self.ln1(x), cache)))\n")],
      "Also normalises the attention's input with ln1, mixing pre-norm into the post-norm block: attention reads "
      "a normalised copy instead of the raw stream.",
      [r"attn\(self\.ln1\(x\)", r"(normali[sz]\w*|ln1) (the )?(attention'?s? )?input", r"(mix|mixing|add\w*) pre-?norm",
       r"(attention|sublayer)'?s? input.{0,30}normali"]),

    # ------------------------------------------------------------------ model
    M("s15_model_plain_list", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        self.blocks = [Block(cfg) for _ in range(cfg.n_layers)]\n")],
      "Holds the blocks in a plain Python list: they are not registered as submodules, so parameters(), "
      "state_dict, .to(device), reset_parameters and the optimiser never see their weights.",
      [r"modulelist", r"plain (python )?list", r"(not )?registered", r"parameters\(\)"]),
    M("s15_model_same_block_repeated", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        self.blocks = nn.ModuleList([Block(cfg)] * cfg.n_layers)\n")],
      "Builds [Block(cfg)] * n_layers, a list of L references to one block: every layer shares the same weights, "
      "so the model has one block's parameters applied L times.",
      [r"\[Block\(cfg\)\] ?\*|\* ?cfg\.n_layers", r"(same|one|single) block", r"shar\w* (the same )?weights|weights? (are )?shared",
       r"references? to"]),
    M("s15_model_ln_f_layernorm", "model.ANDREA",
      [("        self.ln_f = make_norm(cfg)\n", "        self.ln_f = nn.LayerNorm(cfg.d_model)\n")],
      "Always builds the final norm as torch's nn.LayerNorm: an RMSNorm config gets the wrong kind of norm (with a "
      "bias), and a bias-free config still gets a bias.",
      [r"nn\.LayerNorm", r"rms ?norm", r"make_norm", r"norm_eps|cfg\.norm\b"]),
    M("s15_model_forward_no_caches", "model.ANDREA",
      [("            x = block(x, caches[i] if caches else None)              # (B, T, D)",
        "            x = block(x)                                             # (B, T, D)")],
      "Calls every block without its cache: during cached generation no keys or values are stored or read, so "
      "each step attends only to the new tokens.",
      [r"caches\[i\]", r"(without|not pass\w*|forg[eo]t\w*|drop\w*|never pass\w*|ignor\w*) (the |its )?caches?",
       r"cache (is|are) (ignored|never)"]),
    M("s15_model_forward_loop_var", "model.ANDREA",
      [("            x = block(x, caches[i] if caches else None)              # (B, T, D)\n        x = self.ln_f(x)",
        "            h = block(x, caches[i] if caches else None)              # (B, T, D)\n        x = self.ln_f(h)")],
      "Stores each block's output in a new name h while every block keeps reading x, the embeddings: the blocks "
      "do not feed into each other, and only the last block's output reaches the final norm.",
      [r"(every|each) block (reads|gets|sees|receives) (the )?(embedding|same input|x\b)",
       r"(not|never) (fed|feed|chain|pass)\w*", r"(only|just) (the )?last block", r"loop variable|reassign"]),
    M("s15_model_count_attention_mha", "model.count_parameters",
      [("    attention = D * qkv_out + b * qkv_out + D * D + b * D       # W_qkv, b_qkv, W_O, b_O",
        "    attention = 4 * D * D + 4 * b * D                           # W_qkv, b_qkv, W_O, b_O")],
      "Counts attention as four D×D matrices, which assumes G = H: with grouped key/value heads the fused "
      "projection is only (H + 2G)·K wide, so the count is too large.",
      [r"4 ?\* ?D ?\* ?D|four D", r"G ?(<|!=|≠|=) ?H|grouped|kv_heads", r"\(H ?\+ ?2 ?G\)"]),
    M("s15_model_count_norm_always_bias", "model.count_parameters",
      [('    norm = D + (D * b if cfg.norm == "layernorm" else 0)        # gamma (+ beta)',
        "    norm = 2 * D                                                # gamma (+ beta)")],
      "Counts every norm as 2·D, gain and shift: an RMSNorm has only a gain, and a LayerNorm without biases has no "
      "shift.",
      [r"rms ?norm", r"2 ?\* ?D|2·D", r"(shift|beta|bias)\w*.{0,40}norm"]),
    M("s15_model_count_sum_dict", "model.count_parameters",
      [('    counts["total"] = (counts["token_table"] + counts["position_table"] + counts["blocks"]\n'
        '                       + counts["final_norm"] + counts["head"])',
        '    counts["total"] = sum(counts.values())')],
      "Sums every value of the dict as the total: attention, mlp, norms and block are per-block subtotals already "
      "inside blocks, so they are counted again.",
      [r"sum\(counts\.values", r"(double|twice|again)[- ]?count", r"subtotal", r"counted (twice|again)"]),
    M("s15_model_sample_max_pair", "model.sample_next",
      [("        return logits.argmax(dim=-1, keepdim=True)                     # (B, 1)",
        "        return torch.max(logits, dim=-1, keepdim=True)                 # (B, 1)")],
      "Returns torch.max(logits, dim=-1, keepdim=True) for greedy decoding: with a dim it gives a (values, indices) "
      "pair, not the (B, 1) tensor of ids.",
      [r"\.indices", r"values,? (and )?indices", r"named ?tuple", r"argmax"]),
    M("s15_model_sample_kth_no_keepdim", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)",
        "        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1]    # (B, 1)")],
      "Takes the k-th largest value as values[:, -1], a (B,) vector instead of a (B, 1) column: compared with the "
      "(B, V) logits it broadcasts along the vocabulary, so it fails or compares each row with the wrong threshold.",
      [r"\[:, ?-1\]", r"-1:", r"column", r"\(B,\)|\(B, ?1\)"]),
    M("s15_model_sample_le_kth", "model.sample_next",
      [('        logits = logits.masked_fill(logits < kth, float("-inf"))\n',
        '        logits = logits.masked_fill(logits <= kth, float("-inf"))\n')],
      "Masks logits <= the k-th largest instead of <: the k-th token itself (and its ties) is removed, so only "
      "k - 1 tokens can be drawn (none at all when k = 1).",
      [r"<=", r"k ?- ?1", r"k-?th (token|logit|largest).{0,30}(removed|masked|dropped|excluded)"]),
    M("s15_model_sample_temperature_after", "model.sample_next",
      [("    logits = logits / temperature                                      # (B, V)\n", ""),
       ("    probs = torch.softmax(logits, dim=-1)                              # (B, V), rows sum to 1",
        "    probs = torch.softmax(logits, dim=-1) / temperature                # (B, V), rows sum to 1")],
      "Divides the probabilities by the temperature after the softmax instead of the logits before it: "
      "multinomial renormalises the weights, so the temperature has no effect at all.",
      [r"after (the )?softmax", r"before (the )?softmax", r"no effect", r"renormali"]),
    M("s15_model_kv_return_buffer", "model.KVCache",
      [("        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos",
        "        return self.k, self.v                                         # (B, G, S, K), S = pos")],
      "Returns the whole preallocated buffers instead of the filled part: attention also sees max_len - pos "
      "positions of zeros as keys and values.",
      [r":self\.pos", r"(whole|entire|full) (preallocated )?buffer", r"zeros", r"max_len"]),
    M("s15_model_kv_early_return", "model.KVCache",
      [("        self.pos += T\n        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos",
        "        return self.k[:, :, :self.pos + T], self.v[:, :, :self.pos + T]\n        self.pos += T")],
      "Returns before moving self.pos on: the counter stays at 0, so every update overwrites the first slots and "
      "the cache never grows.",
      [r"(before|never|without) (updat|advanc|mov|increment)\w*", r"unreachable", r"pos (stays|never|is never)",
       r"early return"]),

    # ------------------------------------------------------------------ modern
    M("s15_modern_rms_no_cast_back", "modern.rms_norm",
      [("    return (y * weight.to(wide)).to(x.dtype)\n", "    return y * weight.to(wide)\n")],
      "Never casts the result back to x's dtype: a bfloat16 or float16 input comes back as float32.",
      [r"cast\w* (it |the result )?back", r"\.to\(x\.dtype\)", r"(bf16|bfloat16|float16|fp16|half).{0,40}(float32|fp32)"]),
    M("s15_modern_rms_subtracts_mean", "modern.rms_norm",
      [("    xw = x.to(wide)\n", "    xw = x.to(wide)\n    xw = xw - xw.mean(dim=-1, keepdim=True)\n")],
      "Centres each token by subtracting its mean first, as LayerNorm does: RMSNorm never subtracts the mean, so "
      "every token with a non-zero mean comes out wrong.",
      [r"(subtract|centr|center)\w* (the |its )?mean", r"layer ?norm", r"mean (is )?subtracted"]),
    M("s15_modern_hidden_floor", "modern.swiglu_hidden_dim",
      [("\n    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "\n    return multiple_of * int(8 * d_model / 3 / multiple_of)\n")],
      "Rounds with int(), which truncates: the width is rounded down to a multiple of multiple_of instead of up.",
      [r"int\(", r"round\w* down", r"truncat", r"ceil"]),
    M("s15_modern_swiglu_sigmoid_only", "modern.swiglu",
      [("\n    return F.silu(gate) * up\n", "\n    return torch.sigmoid(gate) * up\n")],
      "Gates with sigmoid(gate) instead of Swish(gate) = gate·sigmoid(gate): that is the original GLU, not SwiGLU.",
      [r"sigmoid\(gate\)", r"\bGLU\b", r"swish|silu", r"gate ?[·*] ?sigmoid"]),
    M("s15_modern_swiglu_inplace", "modern.swiglu",
      [("\n    return F.silu(gate) * up\n", "\n    return F.silu(gate, inplace=True) * up\n")],
      "Calls F.silu(gate, inplace=True): the caller's gate tensor is overwritten with Swish(gate), and autograd "
      "refuses it for a leaf that requires grad.",
      [r"in[- ]?place", r"(overwrit|mutat|modif)\w* (the )?(caller|input|gate)"]),
    M("s15_modern_swiglu_module_args", "modern.SwiGLU",
      [("        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D)",
        "        return self.w_down(self.swiglu(self.w_up(x), self.w_gate(x)))   # (B, T, D)")],
      "Passes the value projection as the gate and the gate projection as the value: Swish is applied to w_up(x) "
      "instead of w_gate(x).",
      [r"(swap|revers|exchang|order)\w*.{0,40}(gate|value|argument)", r"w_up\(x\).{0,20}(as|is) (the )?gate",
       r"value projection as the gate|gate projection as the value",
       r"swiglu\(self\.w_up"]),
    M("s15_modern_kv_bytes_n_heads", "modern.kv_cache_bytes",
      [("\n    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n",
        "\n    return 2 * cfg.n_layers * batch * cfg.n_heads * S * cfg.d_head * bytes_per_value\n")],
      "Multiplies by the number of query heads H instead of key/value heads G: grouped heads do not shrink the "
      "computed cache.",
      [r"n_heads", r"query heads", r"kv_heads|key/?value heads"]),
    M("s15_modern_rope_step_one", "modern.rope_frequencies",
      [("    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K",
        "    inv_freq = theta ** (-torch.arange(0, d_head // 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K")],
      "Counts the exponents 0, 1, 2, ... instead of 0, 2, 4, ...: pair i turns at theta^(-i/K) instead of "
      "theta^(-2i/K), so the frequencies fall only half as fast.",
      [r"2i|2 ?\* ?i\b", r"step (of )?2|, ?2,", r"half as fast|i ?/ ?K"]),
    M("s15_modern_rope_float64", "modern.rope_frequencies",
      [("    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K",
        "    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)   # (K/2,): exponent 2i/K")],
      "Builds the frequencies in float64: the angles are promoted and the cos and sin tables come out float64 "
      "instead of float32.",
      [r"float64|double", r"(not|instead of) (fp|float)32"]),
    M("s15_modern_apply_rope_adjacent", "modern.apply_rope",
      [("    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)           # pair (i, i + K/2)",
        "    x1, x2 = x[..., ::2].to(wide), x[..., 1::2].to(wide)              # pair (i, i + K/2)")],
      "Pairs neighbouring features (0, 1), (2, 3), ... (the GPT-J layout) and writes them back as two halves: "
      "not the NeoX/LLaMA pairing of feature i with i + K/2, and the features come back reordered.",
      [r"::2", r"adjacent|neighbo\w*|interleav", r"halves|i ?\+ ?K/2", r"gpt-?j"]),
    M("s15_modern_apply_rope_no_start", "modern.apply_rope",
      [("    c, s = cos[start:start + T], sin[start:start + T]                 # (T, K/2): positions start .. start + T - 1",
        "    c, s = cos[:T], sin[:T]                                           # (T, K/2): positions start .. start + T - 1")],
      "Takes the first T rows of the cos and sin tables, ignoring start: tokens after a cache are turned as if they "
      "sat at positions 0, 1, ...",
      [r"(forg[eo]t\w*|without|ignor\w*|miss\w*|leav\w* out|not us\w*) (the )?start", r"\[:T\]", r"positions? 0\b"]),
    M("s15_modern_apply_rope_stack_flatten", "modern.apply_rope",
      [("    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)\n",
        "    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2).to(x.dtype)\n")],
      "Joins the two rotated halves with stack(..., dim=-1).flatten(-2), which interleaves them feature by feature "
      "instead of putting the first half before the second.",
      [r"stack", r"flatten", r"interleav", r"torch\.cat"]),
    M("s15_modern_rope_attention_rotates_v", "modern.rope_attention",
      [("    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)\n",
        "    q, k, v = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start), apply_rope(v, cos, sin, start)\n")],
      "Also rotates the values: RoPE belongs to queries and keys only, and turning v changes the outputs and the "
      "cached values.",
      [r"(rotat|turn)\w* (the )?(values|v)\b", r"values?.{0,30}(never|not be|should not).{0,15}(rotat|turn)", r"apply_rope\(v"]),
    M("s15_modern_rope_attention_batch_start", "modern.rope_attention",
      [("    start = past_k.shape[-2]                                          # S0: positions already cached",
        "    start = past_k.shape[0]                                           # S0: positions already cached")],
      "Reads the cached count from past_k.shape[0], the batch size, instead of the position axis: the new tokens "
      "are turned by the wrong positions.",
      [r"shape\[0\]", r"batch (size|axis)", r"(position|second[- ]to[- ]last) axis"]),
    M("s15_modern_rope_attention_rerotate_past", "modern.rope_attention",
      [("    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)\n"
        "    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)",
        "    q = apply_rope(q, cos, sin, start)\n"
        "    k_all, v_all = apply_rope(torch.cat([past_k, k], dim=-2), cos, sin), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)")],
      "Rotates the concatenation of cached and new keys from position 0: the cached keys, already turned, are "
      "turned a second time.",
      [r"(rotat|turn)\w* (twice|a second time|again)", r"already (turned|rotated)", r"double[- ]rotat"]),

    # ------------------------------------------------------------------ kernels
    M("s15_kernels_gelu_program_id_axis", "kernels.gelu_kernel",
      [("    pid = tl.program_id(0)\n    offs = pid * BLOCK", "    pid = tl.program_id(1)\n    offs = pid * BLOCK")],
      "Reads tl.program_id(1) on a one-dimensional grid: it is always 0, so every program computes the first block "
      "and the others are never written.",
      [r"program_id\(1\)", r"axis (1|0)", r"(always|every program).{0,30}(0|zero|first block)"]),
    M("s15_kernels_gelu_mask_le", "kernels.gelu_kernel",
      [("    mask = offs < n_elements                                 # the ragged tail of the last block",
        "    mask = offs <= n_elements                                # the ragged tail of the last block")],
      "Masks with offs <= n_elements: the lane one past the end is still loaded and stored, so the kernel writes "
      "one element beyond y.",
      [r"<=", r"one (element |lane )?(past|beyond|after) (the end|y)", r"off[- ]by[- ]one"]),
    M("s15_kernels_gelu_sigmoid_z", "kernels.gelu_kernel",
      [("    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0\n", "    tanh_z = 2.0 * tl.sigmoid(z) - 1.0\n")],
      "Writes tanh(z) as 2·sigmoid(z) - 1 instead of 2·sigmoid(2z) - 1: that is tanh(z/2), so the GELU curve comes "
      "out wrong.",
      [r"sigmoid\(2(\.0)? ?\* ?z\)|sigmoid\(2z\)|\b2z\b", r"tanh\(z ?/ ?2\)", r"identity"]),
    M("s15_kernels_gelu_launch_floor", "kernels.gelu_kernel",
      [("    grid = (triton.cdiv(n, block),)\n", "    grid = (n // block,)\n")],
      "The launcher sizes the grid with n // block, rounding down: the last, partial block gets no program, so its "
      "elements are never computed (and an input smaller than a block launches nothing).",
      [r"cdiv", r"n ?// ?block", r"round\w* (down|up)",
       r"(last|partial|ragged) block.{0,40}(never|no program|not (computed|launched))|(no program|never computed).{0,40}(last|partial|ragged) block"]),
    M("s15_kernels_ln_no_where", "kernels.layer_norm_kernel",
      [("    xc = tl.where(mask, x - mean, 0.0)                       # padding lanes would add mean² each",
        "    xc = x - mean                                            # padding lanes would add mean² each")],
      "Centres the row without zeroing the padding lanes again: each padding lane holds -mean, whose square "
      "inflates the variance whenever D is not a power of two.",
      [r"tl\.where", r"padding.{0,60}(varian|mean|zero)", r"mean ?(²|\*\* ?2|squared)"]),
    M("s15_kernels_ln_store_std", "kernels.layer_norm_kernel",
      [("    rstd = 1.0 / tl.sqrt(var + eps)\n    y = xc * rstd * tl.load", "    rstd = tl.sqrt(var + eps)\n    y = xc / rstd * tl.load")],
      "Keeps the standard deviation in rstd and divides by it: the normalised row is right, but the saved value is "
      "the standard deviation, not its reciprocal, so the backward pass gets the wrong rstd.",
      [r"reciprocal|1 ?/ ?std|1(\.0)? ?/ ?(tl\.)?sqrt", r"(stores?|saves?|saved|stored) (the )?(std|standard deviation)",
       r"\brstd\b"]),
    M("s15_kernels_ln_bias_gamma", "kernels.layer_norm_kernel",
      [("        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n",
        "        y += tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n")],
      "Loads the shift from w_ptr instead of b_ptr (a copy-paste slip): gamma is added where beta should be.",
      [r"w_ptr", r"b_ptr", r"copy[- ]paste", r"gamma.{0,30}(instead|added)"]),
    M("s15_kernels_softmax_other_zero", "kernels.softmax_kernel",
      [('    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)',
        "    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)")],
      "Loads the padding lanes as 0.0 instead of -inf: each adds exp(0 - max) to the sum (and 0 can win the max of "
      "a negative row), so rows whose length is not a power of two do not sum to 1.",
      [r"other ?= ?0", r"(-inf|minus infinity).{0,40}(padding|masked)|(padding|masked).{0,40}(-inf|minus infinity)",
       r"padding.{0,40}(0|zero)"]),
    M("s15_kernels_softmax_store_x_stride", "kernels.softmax_kernel",
      [("    tl.store(y_ptr + row * y_row_stride + cols,", "    tl.store(y_ptr + row * x_row_stride + cols,")],
      "Stores each row at row × x_row_stride, the input's stride: when x is a slice of a wider matrix the output "
      "rows land in the wrong places, leaving rows unwritten and writing past the end of y.",
      [r"x_row_stride", r"y_row_stride", r"(own|output'?s?|y'?s?) (row )?stride"]),
    M("s15_kernels_softmax_no_max", "kernels.softmax_kernel",
      [("    e = tl.exp(x - tl.max(x, axis=0))                        # each <= 1; padding: exp(-inf) = 0",
        "    e = tl.exp(x)                                            # each <= 1; padding: exp(-inf) = 0")],
      "Exponentiates without subtracting the row maximum: scores above about 88 overflow fp32 to inf and the row "
      "becomes NaN.",
      [r"(subtract\w*|without|no) (the )?(row'?s? )?max(imum)?", r"overflow", r"tl\.exp\(x\)"]),
    M("s15_kernels_softmax_launch_col_stride", "kernels.softmax_kernel",
      [("    kernel[(rows,)](x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=block)",
        "    kernel[(rows,)](x2, y, x2.stride(1), y.stride(0), n_cols, BLOCK=block)")],
      "The launcher passes x2.stride(1), the column stride (1), as the input's row stride: program r reads the "
      "elements starting at r, so every row but the first is wrong.",
      [r"stride\(1\)", r"column stride", r"stride\(0\)"]),
    M("s15_kernels_flash_hi_no_start", "kernels.flash_attention_kernel",
      [("    hi = tl.minimum(S, start + first + BLOCK_M)              # keys after the block's last position: skipped",
        "    hi = tl.minimum(S, first + BLOCK_M)                      # keys after the block's last position: skipped")],
      "Stops the key loop at first + BLOCK_M, forgetting start: with cached keys (start > 0) the last keys a query "
      "may see are never visited.",
      [r"(forg[eo]t\w*|without|ignor\w*|miss\w*|leav\w* out) (the )?start", r"(loop|bound|\bhi\b).{0,40}(stop|end|early|short)",
       r"first ?\+ ?BLOCK_M"]),
    M("s15_kernels_flash_visible_no_start", "kernels.flash_attention_kernel",
      [("        visible = (cols[None, :] < S) & (cols[None, :] <= start + rows[:, None])",
        "        visible = (cols[None, :] < S) & (cols[None, :] <= rows[:, None])")],
      "Compares key j with the query's row i instead of its position start + i: with a cache every query is cut "
      "off start keys too early.",
      [r"start ?\+ ?(rows|i)\b", r"(forg[eo]t\w*|without|ignor\w*|miss\w*|leav\w* out) (the )?start", r"absolute position"]),
    M("s15_kernels_flash_no_alpha_acc", "kernels.flash_attention_kernel",
      [('        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")',
        '        acc = acc + tl.dot(p, v, input_precision="ieee")')],
      "Does not rescale the accumulator by exp(m - m_new) when the running max grows: the old part of acc is "
      "weighted against a stale max while l is rescaled, so rows spanning several key tiles come out wrong.",
      [r"alpha", r"rescal", r"exp\(m ?- ?m_new\)|exp\(m ?- ?m'\)"]),
    M("s15_kernels_flash_launch_scale", "kernels.flash_attention_kernel",
      [("    kernel[grid](q_, k_, v_, o, lse, T, S, K, start, 1.0 / K ** 0.5,",
        "    kernel[grid](q_, k_, v_, o, lse, T, S, K, start, 1.0 / K,")],
      "The launcher passes sm_scale = 1/K instead of 1/sqrt(K): the scores are scaled down too much and the "
      "attention comes out too flat.",
      [r"1(\.0)? ?/ ?K\b(?! ?\*\*)", r"sqrt|\*\* ?0\.5|square root", r"sm_scale"]),

    # ------------------------------------------------------------------ bpe
    M("s15_bpe_counts_set", "bpe.pair_counts",
      [("        for pair in zip(word, word[1:]):\n            counts[pair] += n",
        "        for pair in set(zip(word, word[1:])):\n            counts[pair] += n")],
      "Takes set(zip(...)) of each word's pairs: a pair that occurs several times in one word (overlapping as in "
      "(7, 7, 7), or repeated) is counted once per word.",
      [r"set\(", r"overlap|repeat", r"once per word"]),
    M("s15_bpe_merge_step_one", "bpe.merge_pair",
      [("            out.append(new_id)\n            i += 2\n", "            out.append(new_id)\n            i += 1\n")],
      "Moves on by one after a merge instead of two: the second symbol of the merged pair is used again, so "
      "(7, 7, 7) becomes (256, 256, 7) instead of (256, 7).",
      [r"i ?\+= ?(1|2)", r"(skip|jump)\w* (two|2|past|over)", r"(used|reused|counted|merged) (again|twice)",
       r"\(256, ?256, ?7\)"]),
    M("s15_bpe_merge_returns_list", "bpe.merge_pair",
      [("    return tuple(out)\n", "    return out\n")],
      "Returns the list out instead of a tuple: it never equals the expected tuple, and a list cannot be a dict "
      "key when train_bpe rebuilds the words.",
      [r"tuple", r"\blist\b", r"hashable|dict(ionary)? key"]),
    M("s15_bpe_best_max_tie", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n",
        "    return max(counts, key=lambda p: (counts[p], tie_key(p)))\n")],
      "Uses max with the key (count, tie_key): the count is right, but among equal counts it picks the pair with "
      "the largest tie_key instead of the smallest.",
      [r"(largest|biggest|highest|greatest) tie_key", r"tie.{0,40}(wrong|revers|opposite|largest)", r"\bmax\("]),
    M("s15_bpe_best_dict_order", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n", "    return max(counts, key=counts.get)\n")],
      "Uses max(counts, key=counts.get), which ignores tie_key: among equal counts it returns whichever pair comes "
      "first in the dict's insertion order.",
      [r"tie_key", r"insertion order|dict(ionary)?'?s? order|first (inserted|seen|encountered)", r"counts\.get"]),
    M("s15_bpe_train_stale_counts", "bpe.train_bpe",
      [("    merges = []\n    for _ in range(n_merges):\n        pair = most_frequent_pair(pair_counts(words))\n",
        "    merges = []\n    counts = pair_counts(words)\n    for _ in range(n_merges):\n        pair = most_frequent_pair(counts)\n")],
      "Counts the pairs once before the loop and never again: every round picks the same winner from the stale "
      "tally instead of following the merged words.",
      [r"(once|only) before the loop", r"stale|recount|(never|not) (re)?count\w* again|not updated", r"same pair"]),
    M("s15_bpe_train_mutate_while_iter", "bpe.train_bpe",
      [("        merged = Counter()\n        for word, n in words.items():\n            merged[merge_pair(word, pair, new_id)] += n\n        words = merged\n",
        "        for word in words:\n            words[merge_pair(word, pair, new_id)] = words.pop(word)\n")],
      "Rewrites the words dict while iterating over it (pop and re-insert): Python refuses a dict whose keys change "
      "during iteration.",
      [r"(while|during) (the )?iterat", r"(mutat|modif|chang)\w* .{0,20}(dict|words).{0,20}(while|during)", r"\.pop\("]),
    M("s15_bpe_encode_leftmost", "bpe.encode",
      [("            pair = min(pairs, key=rank.__getitem__)\n", "            pair = pairs[0]\n")],
      "Applies the leftmost mergeable pair instead of the one learned earliest: a later merge can be applied before "
      "an earlier one, giving tokens that training never made.",
      [r"pairs\[0\]", r"leftmost|first (pair )?(in|of) the word", r"(lowest|earliest|smallest) rank"]),
    M("s15_bpe_encode_early_return", "bpe.encode",
      [("            if not pairs:\n                break\n", "            if not pairs:\n                return ids\n")],
      "Returns from encode as soon as one word has no mergeable pair left: that word and every word after it are "
      "missing from the ids.",
      [r"return.{0,40}(instead of|rather than) (a )?(break|continu)", r"early return|returns? (too )?early",
       r"(later|remaining|following|rest of the) words", r"\bbreak\b", r"return ids|returns? from encode"]),
    M("s15_bpe_decode_latin1", "bpe.decode",
      [("    table = [bytes([b]) for b in range(256)]\n", "    table = [chr(b) for b in range(256)]\n"),
       ('    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")\n',
        '    return "".join(table[i] for i in ids)\n')],
      "Builds the table from chr(b), one character per byte: the bytes are read as Latin-1 code points instead of "
      "being decoded as UTF-8, so any non-ASCII text comes out garbled.",
      [r"chr\(", r"latin-?1", r"utf-?8", r"bytes.{0,20}(vs\.?|versus|instead of|not) (str|strings?|characters)"]),
    M("s15_bpe_decode_per_token", "bpe.decode",
      [('    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")\n',
        '    return "".join(table[i].decode("utf-8", errors="replace") for i in ids)\n')],
      "Decodes every token's bytes separately: a character whose UTF-8 bytes are split over two tokens becomes "
      "replacement characters instead of being rebuilt.",
      [r"(each|every) token.{0,40}(separately|on its own|individually)", r"split (over|across)",
       r"decod\w* (the )?(whole|all) (at once|together)"]),
    # ------------------------------------------------------------------ optim
    M("s15_optim_lr_no_cap", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1",
        "    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)            # 0 .. 1")],
      "Does not cap the progress at 1: after max_steps the cosine climbs back up from min_lr instead of staying there.",
      [r"\bcap\b|capp|clamp|min\(1", r"after max_steps", r"(climb|ris|go)\w* (back )?up"]),
    M("s15_optim_lr_no_pi", "optim.lr_at",
      [("    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))\n",
        "    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(progress))\n")],
      "Takes math.cos(progress) without pi: the angle only goes from 0 to 1 radian, so the rate at max_steps is "
      "far above min_lr.",
      [r"math\.pi|\bpi\b|π", r"radian"]),
    M("s15_optim_lr_int_div", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1",
        "    progress = min(1.0, (step - warmup_steps) // max(1, max_steps - warmup_steps))  # 0 .. 1")],
      "Computes the progress with floor division //: it stays 0 until max_steps, so the rate holds at lr and then "
      "drops straight to min_lr.",
      [r"//", r"(floor|integer) division", r"(stays|holds|stuck) (at )?(0|zero|lr)"]),
    M("s15_optim_adam_coupled_decay", "optim.adamw_step",
      [("    beta1, beta2 = betas\n    m = beta1 * m", "    beta1, beta2 = betas\n    grad = grad + weight_decay * param\n    m = beta1 * m"),
       ("    param = param * (1 - lr * weight_decay)                    # decoupled: not through the gradient\n", "")],
      "Adds weight_decay·param to the gradient (L2 regularisation, as plain Adam does) instead of shrinking the "
      "weights directly: the decay is then divided by sqrt(v̂) like the gradient.",
      [r"\bl2\b", r"decoupled|coupled", r"(added|adds?|adding) (it )?(to|into) the grad", r"grad ?\+ ?weight_decay"]),
    M("s15_optim_adam_bias_power", "optim.adamw_step",
      [("    m_hat = m / (1 - beta1 ** step)                            # bias correction: both started at 0\n"
        "    v_hat = v / (1 - beta2 ** step)",
        "    m_hat = m / (1 - beta1) ** step                            # bias correction: both started at 0\n"
        "    v_hat = v / (1 - beta2) ** step")],
      "Writes the bias correction as (1 - beta)^step instead of 1 - beta^step: the two agree at step 1, but from "
      "step 2 on both corrections are far too large, so m̂, v̂ and the step size come out wrong.",
      [r"\(1 ?- ?beta\d?\) ?(\*\*|\^) ?step", r"1 ?- ?beta\d? ?(\*\*|\^) ?step", r"parenthes|precedence"]),
    M("s15_optim_adam_inplace_moments", "optim.adamw_step",
      [("    m = beta1 * m + (1 - beta1) * grad                         # running mean of g\n"
        "    v = beta2 * v + (1 - beta2) * grad * grad                  # running mean of g²",
        "    m.mul_(beta1).add_((1 - beta1) * grad)                     # running mean of g\n"
        "    v.mul_(beta2).add_((1 - beta2) * grad * grad)              # running mean of g²")],
      "Updates m and v in place with mul_ and add_: the returned values are right, but the caller's m and v "
      "tensors are overwritten as a side effect.",
      [r"in[- ]place", r"mul_|add_", r"(caller|input)'?s? (m|v|moments)|side effect"]),

    # ------------------------------------------------------------------ inside
    M("s15_inside_residual_remove_not_called", "inside.residual_stream",
      [("            handle.remove()\n    return torch.stack(seen)", "            handle.remove\n    return torch.stack(seen)")],
      "Writes handle.remove without the parentheses: the method is never called, so every hook stays on the model "
      "and later passes record extra outputs.",
      [r"remove\(\)", r"parenthes", r"(never|not) (called|removed)", r"hooks? (stay|remain|left)"]),
    M("s15_inside_residual_no_finally", "inside.residual_stream",
      [("    try:\n        with torch.no_grad():\n            model(ids)\n    finally:\n        for handle in handles:\n"
        "            handle.remove()\n    return torch.stack(seen)",
        "    with torch.no_grad():\n        model(ids)\n    for handle in handles:\n        handle.remove()\n"
        "    return torch.stack(seen)")],
      "Removes the hooks only after a successful pass, without try/finally: when the forward pass raises (bad ids), "
      "the hooks stay on the model.",
      [r"finally", r"(raise|exception|error).{0,40}hooks? (stay|remain|left)", r"try ?/ ?finally|try:"]),
    M("s15_inside_residual_grad_outside", "inside.residual_stream",
      [("    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]\n"
        "    try:\n        with torch.no_grad():\n            model(ids)\n",
        "    with torch.no_grad():\n"
        "        handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]\n"
        "    try:\n        model(ids)\n")],
      "Puts torch.no_grad() around the hook registration instead of the forward pass: the model runs with "
      "gradients on, so the recorded stream carries an autograd graph (requires_grad) and holds its memory.",
      [r"no_grad", r"requires_grad|autograd graph|gradients? (on|tracked|enabled|recorded)"]),
    M("s15_inside_patterns_block_input", "inside.attention_patterns",
      [("    handles = [block.attn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]",
        "    handles = [block.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]")],
      "Hooks the block instead of block.attn: it records the raw residual stream, not the normalised ln1(x) the "
      "attention actually receives, so the recomputed weights are wrong.",
      [r"block\.attn", r"normali[sz]ed|ln1", r"raw (residual )?stream"]),
    M("s15_inside_patterns_diag_masked", "inside.attention_patterns",
      [("    future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)",
        "    future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu()")],
      "Builds the mask with triu() without the offset 1: the diagonal is masked too, so no query sees itself and the "
      "first row is all -inf, NaN after the softmax.",
      [r"triu\(1\)|triu\(\)", r"diagonal.{0,40}mask|mask\w*.{0,40}diagonal", r"(sees?|see|attend\w*( to)?) itself"]),
    M("s15_inside_patterns_q_k_swapped", "inside.attention_patterns",
      [("            q, k, _ = block.attn.qkv(x).split([H * K] * 3, dim=-1)     # (B, T, D) each",
        "            k, q, _ = block.attn.qkv(x).split([H * K] * 3, dim=-1)     # (B, T, D) each")],
      "Unpacks the fused projection as k, q, v: the first D features are the queries, so queries and keys trade "
      "roles and the scores are the wrong ones.",
      [r"k, ?q\b", r"(swap|revers|exchang|trade)\w*.{0,30}(q\b|queries|keys|roles)", r"order of (the )?(split|parts|blocks)"]),
    M("s15_inside_lens_no_ln", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)",
        "        return stream @ model.output_weight().T                        # (L + 1, B, T, V)")],
      "Reads the stream out without the final norm model.ln_f: no entry matches how the model reads its last "
      "stream, not even the last one.",
      [r"ln_f", r"final norm"]),
    M("s15_inside_lens_token_table", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)",
        "        return model.ln_f(stream) @ model.embed.token_table.T          # (L + 1, B, T, V)")],
      "Uses the token table as the output matrix: right only for a tied model; with a separate head the readout is "
      "not the model's.",
      [r"token_table", r"(instead of|not|rather than) (model\.)?output_weight", r"\b(tied|untied)\b"]),
    M("s15_inside_induction_same_token", "inside.induction_scores",
      [("    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)",
        "    return patterns[..., t, t - period].mean(dim=(1, 3))               # (L, B, H, P') -> (L, H)")],
      "Picks key t - period, the earlier copy of the same token, instead of t - period + 1, the token that followed "
      "it: that measures a duplicate-token head, not an induction head.",
      [r"t ?- ?period ?\+ ?1", r"(same|previous|earlier) (copy|token)", r"followed|the next token", r"duplicate"]),
    M("s15_inside_induction_grid", "inside.induction_scores",
      [("    return patterns[..., t, t - period + 1].mean(dim=(1, 3))",
        "    return patterns[..., t, :][..., t - period + 1].mean(dim=(1, 3, 4))")],
      "Indexes the queries and the keys in two separate steps: that selects the whole P × P grid of query-key "
      "combinations instead of the P matching pairs, so the score averages the weights of the wrong keys.",
      [r"(two|separate) (steps|index)", r"grid|every combination|all combinations", r"\bpairs\b"]),
]


VARIANTS = [
    V("s15_embeddings_lookup_index_select_flat", "embeddings.embed_lookup",
      [("\n    return table[ids]\n",
        "\n    flat = table.index_select(0, ids.reshape(-1))                  # (B·T, D)\n"
        "    return flat.reshape(*ids.shape, table.shape[-1])\n")],
      "index_select on the flattened ids, then the ids' shape restored: the same rows, the same gradient."),
    V("s15_attention_average_past_matmul", "attention.average_past",
      [("    T = x.shape[-2]\n    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)",
        "    T = x.shape[-2]\n    w = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))\n"
        "    return (w / w.sum(dim=-1, keepdim=True)) @ x")],
      "The running mean as one product with the lower-triangular averaging matrix."),
    V("s15_attention_mask_tril_offset", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n    j = torch.arange(S, device=device)[None, :]   # (1, S)\n"
        "    return j <= i + (S - T)\n",
        "    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)\n")],
      "A boolean lower triangle shifted right by the S - T cached keys."),
    V("s15_attention_softmax_logsumexp", "attention.softmax",
      [("    e = z.exp()\n    return e / e.sum(dim=-1, keepdim=True)\n",
        "    return (z - z.exp().sum(dim=-1, keepdim=True).log()).exp()\n")],
      "exp of the shifted scores minus their log-sum-exp: the same normalisation done in log space."),
    V("s15_multihead_split_unflatten", "multihead.split_heads",
      [("\n    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "\n    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)\n")],
      "unflatten the feature axis into (H, K), then permute the head axis in front of the positions."),
    V("s15_multihead_merge_cat_unbind", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n", "    return torch.cat(x.unbind(dim=1), dim=-1)\n")],
      "The heads taken apart along their axis and concatenated side by side along the features."),
    V("s15_multihead_entropy_entr", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)",
        "    per_query = torch.special.entr(weights).sum(dim=-1)              # (B, H, T)")],
      "torch.special.entr gives -w·log w with 0 at w = 0, as the docstring allows."),
    V("s15_mlp_gelu_tanh_sigmoid", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n",
        "    return x * torch.sigmoid(2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))\n")],
      "0.5·(1 + tanh(z)) = sigmoid(2z): the same tanh-form GELU written through a sigmoid."),
    V("s15_block_layer_norm_var_rsqrt", "block.layer_norm",
      [("    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased\n"
        "    y = (x - mean) / torch.sqrt(var + eps)\n",
        "    var = x.var(dim=-1, keepdim=True, unbiased=False)         # (..., 1), biased\n"
        "    y = (x - mean) * torch.rsqrt(var + eps)\n")],
      "The biased variance from Tensor.var(unbiased=False) and a multiplication by rsqrt."),
    V("s15_model_sample_kth_by_sort", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)",
        "        k = min(top_k, logits.shape[-1])\n"
        "        kth = logits.sort(dim=-1, descending=True).values[:, k - 1:k]                 # (B, 1)")],
      "The k-th largest logit of each row read off a descending sort instead of topk."),
    V("s15_modern_hidden_integer_ceil", "modern.swiglu_hidden_dim",
      [("\n    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "\n    return multiple_of * -(-8 * d_model // (3 * multiple_of))\n")],
      "Ceiling division in exact integer arithmetic: -(-a // b)."),
    V("s15_bpe_train_dict_comprehension", "bpe.train_bpe",
      [("        merged = Counter()\n        for word, n in words.items():\n            merged[merge_pair(word, pair, new_id)] += n\n        words = merged\n",
        "        words = {merge_pair(word, pair, new_id): n for word, n in words.items()}\n")],
      "A dict comprehension: distinct words stay distinct after a merge (the new id stands for that pair only), so "
      "no counts need adding up."),
    V("s15_bpe_encode_scan_lowest_rank", "bpe.encode",
      [("        while len(word) > 1:\n            pairs = [p for p in zip(word, word[1:]) if p in rank]\n"
        "            if not pairs:\n                break\n            pair = min(pairs, key=rank.__getitem__)\n"
        "            word = merge_pair(word, pair, 256 + rank[pair])\n",
        "        while True:\n            best = None\n            for a, b in zip(word, word[1:]):\n"
        "                r = rank.get((a, b))\n                if r is not None and (best is None or r < best):\n"
        "                    best = r\n            if best is None:\n                break\n"
        "            word = merge_pair(word, tuple(merges[best]), 256 + best)\n")],
      "The lowest-ranked neighbouring pair found by an explicit scan with rank.get, then merged; stops when no pair "
      "has a rank (a single token has no pairs)."),
    V("s15_optim_adamw_one_line", "optim.adamw_step",
      [("    param = param * (1 - lr * weight_decay)                    # decoupled: not through the gradient\n"
        "    param = param - lr * m_hat / (v_hat.sqrt() + eps)\n",
        "    param = param - lr * (weight_decay * param + m_hat / (v_hat.sqrt() + eps))\n")],
      "The decoupled decay and the Adam step folded into one expression: p - lr·(wd·p + m̂/(sqrt(v̂) + eps))."),
    V("s15_kernels_softmax_where_padding", "kernels.softmax_kernel",
      [('    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)',
        "    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
        '    x = tl.where(mask, x, float("-inf"))')],
      "Padding loaded as 0 and then replaced by -inf with tl.where before the max and the sum."),
    V("s15_inside_induction_diagonal", "inside.induction_scores",
      [("    t = torch.arange(period, patterns.shape[-2], device=patterns.device)    # the queries of the repeat\n"
        "    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)",
        "    diag = torch.diagonal(patterns, offset=1 - period, dim1=-2, dim2=-1)    # w[i, i - period + 1], i >= period - 1\n"
        "    return diag[..., 1:].mean(dim=(1, 3))                              # (L, B, H, P') -> (L, H)")],
      "The weights w[t, t - period + 1] read as a diagonal below the main one, dropping its first entry (t = period - 1)."),
]
