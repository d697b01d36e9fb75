// word2vec's skip-gram with negative sampling on random walks, Hogwild (skipgram.cpp).
#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <tuple>

std::tuple<int64_t, int64_t> skipgram_train(const at::Tensor& walks, const at::Tensor& syn0,
                                            const at::Tensor& syn1, const at::Tensor& keep,
                                            const at::Tensor& noise_nodes,
                                            const at::Tensor& noise_keep,
                                            const at::Tensor& noise_alias, int64_t window,
                                            int64_t negatives, double lr, double final_rate,
                                            int64_t walks_before, int64_t total_walks,
                                            int64_t hold_walks, int64_t threads,
                                            uint64_t seed, int64_t vector_width = 0);
