// The 2-layer LSTM language model on Penn Treebank: Zaremba, Sutskever, Vinyals, "Recurrent Neural Network
// Regularization" (2014), the "large" model (1500 hidden units, 10,000 words, 35-step unrolling), built as
// PyTorch examples/word_language_model (model.py RNNModel, --emsize 1500 --nhid 1500 --nlayers 2, untied).
// A sample is one sequence of 35 token ids (int64).
#include "dag/zoo/builder.hpp"
#include "dag/zoo/families.hpp"

namespace ddlsim::dag::detail {

Model build_lstm_ptb() {
  constexpr std::int64_t kSequence = 35; // bptt
  constexpr std::int64_t kVocabulary = 10000;
  constexpr std::int64_t kHidden = 1500; // emsize = nhid
  constexpr double kTokenBytes = 8;      // int64 ids
  ModelBuilder b("lstm-ptb", kTokenBytes * kSequence);
  b.embedding("encoder", kSequence, kVocabulary, kHidden);
  b.dropout(kSequence * kHidden); // emb = drop(encoder(input))
  const Src rnn = b.lstm("rnn", b.last(), kSequence, {kHidden, kHidden, 2, true});
  b.dropout(kSequence * kHidden); // output = drop(output)
  b.linear("decoder", rnn, kSequence, kHidden, kVocabulary);
  b.cross_entropy(kSequence * kVocabulary); // log_softmax + NLLLoss
  return std::move(b).finish();
}

} // namespace ddlsim::dag::detail
