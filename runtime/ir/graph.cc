// Graph, Node and Value: construction, rewiring with use-list upkeep, topological order, deep copy.
#include "runtime/ir/graph.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_set>

namespace onnxamp::ir {

// ---------------------------------------------------------------- Value

void Value::RemoveUse(Node* node, int index) {
  auto it = std::find(uses_.begin(), uses_.end(), Use{node, index});
  ONNXAMP_CHECK(it != uses_.end(), "value '", name_, "' has no use by input ", index, " of ", node->Describe());
  uses_.erase(it);
}

// ---------------------------------------------------------------- Node

std::string Node::Describe() const {
  if (!name_.empty()) return StrCat(op_type_, " '", name_, "'");
  for (const Value* out : outputs_) {
    if (out) return StrCat(op_type_, " (unnamed, output '", out->name(), "')");
  }
  return StrCat(op_type_, " (unnamed)");
}

void Node::SetInput(size_t i, Value* v) {
  ONNXAMP_CHECK(i < inputs_.size(), "input index ", i, " out of range for ", Describe());
  ONNXAMP_CHECK(v == nullptr || v->graph_ == graph_, "value '", v ? v->name() : "", "' belongs to another graph");
  if (inputs_[i]) inputs_[i]->RemoveUse(this, static_cast<int>(i));
  inputs_[i] = v;
  if (v) v->uses_.push_back({this, static_cast<int>(i)});
}

void Node::AddInput(Value* v) {
  inputs_.push_back(nullptr);
  SetInput(inputs_.size() - 1, v);
}

void Node::RemoveInput(size_t i) {
  ONNXAMP_CHECK(i < inputs_.size(), "input index ", i, " out of range for ", Describe());
  SetInput(i, nullptr);
  for (size_t j = i + 1; j < inputs_.size(); ++j) {
    if (!inputs_[j]) continue;
    for (Use& u : inputs_[j]->uses_) {
      if (u.node == this && u.index == static_cast<int>(j)) {
        u.index = static_cast<int>(j - 1);
        break;
      }
    }
  }
  inputs_.erase(inputs_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Node::DropTrailingOmittedOutputs() {
  while (!outputs_.empty() && outputs_.back() == nullptr) outputs_.pop_back();
}

void Node::SetOutput(size_t i, Value* v) {
  ONNXAMP_CHECK(i <= outputs_.size(), "output index ", i, " out of range for ", Describe());
  if (i == outputs_.size()) outputs_.push_back(nullptr);
  if (outputs_[i]) {
    outputs_[i]->producer_ = nullptr;
    outputs_[i]->producer_index_ = -1;
  }
  outputs_[i] = v;
  if (v) {
    ONNXAMP_CHECK(v->graph_ == graph_, "value '", v->name(), "' belongs to another graph");
    ONNXAMP_CHECK(v->producer_ == nullptr || v->producer_ == this, "value '", v->name(), "' already has producer ",
                  v->producer_->Describe());
    v->producer_ = this;
    v->producer_index_ = static_cast<int>(i);
  }
}

const Attribute* Node::FindAttribute(std::string_view name) const {
  for (const Attribute& a : attributes_)
    if (a.name() == name) return &a;
  return nullptr;
}

Attribute* Node::FindAttribute(std::string_view name) {
  for (Attribute& a : attributes_)
    if (a.name() == name) return &a;
  return nullptr;
}

void Node::AdoptSubgraphs(Attribute& attr) {
  if (attr.g) attr.g->parent_node_ = this;
  for (auto& g : attr.graphs)
    if (g) g->parent_node_ = this;
}

void Node::SetAttribute(Attribute attr) {
  AdoptSubgraphs(attr);
  if (Attribute* existing = FindAttribute(attr.name())) {
    *existing = std::move(attr);
  } else {
    attributes_.push_back(std::move(attr));
  }
}

bool Node::RemoveAttribute(std::string_view name) {
  auto it = std::find_if(attributes_.begin(), attributes_.end(), [&](const Attribute& a) { return a.name() == name; });
  if (it == attributes_.end()) return false;
  attributes_.erase(it);
  return true;
}

int64_t Node::GetInt(std::string_view name, int64_t default_value) const {
  const Attribute* a = FindAttribute(name);
  return a && a->type() == AttrType::kInt ? a->i : default_value;
}

float Node::GetFloat(std::string_view name, float default_value) const {
  const Attribute* a = FindAttribute(name);
  return a && a->type() == AttrType::kFloat ? a->f : default_value;
}

std::string Node::GetString(std::string_view name, std::string default_value) const {
  const Attribute* a = FindAttribute(name);
  return a && a->type() == AttrType::kString ? a->s : default_value;
}

std::vector<int64_t> Node::GetInts(std::string_view name, std::vector<int64_t> default_value) const {
  const Attribute* a = FindAttribute(name);
  return a && a->type() == AttrType::kInts ? a->ints : default_value;
}

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  for (const Attribute& a : attributes_) {
    if (a.g) out.push_back(a.g.get());
    for (const auto& g : a.graphs)
      if (g) out.push_back(g.get());
  }
  return out;
}

// ---------------------------------------------------------------- Graph

Graph::Graph(std::string name) : name_(std::move(name)) {}

Graph::~Graph() {
  // Nodes go first: they refer to values, never the other way round for ownership.
  nodes_.clear();
}

Value* Graph::FindValue(std::string_view name) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() ? nullptr : it->second;
}

Value* Graph::ResolveValue(std::string_view name) const {
  for (const Graph* g = this; g != nullptr; g = g->parent()) {
    if (Value* v = g->FindValue(name)) {
      if (!v->is_outer_scope()) return v;
    }
  }
  return nullptr;
}

Value* Graph::CreateValue(std::string name) {
  ONNXAMP_CHECK(!name.empty(), "values need a name");
  ONNXAMP_CHECK(!values_.count(name), "graph '", name_, "' already has a value named '", name, "'");
  auto v = std::unique_ptr<Value>(new Value(this, name));
  Value* raw = v.get();
  values_.emplace(std::move(name), raw);
  value_storage_.push_back(std::move(v));
  return raw;
}

Value* Graph::CreateOuterScopeValue(std::string name) {
  Value* v = CreateValue(std::move(name));
  v->outer_scope_ = true;
  return v;
}

namespace {

bool NameUsedBelow(const Graph& g, const std::string& name) {
  if (g.FindValue(name)) return true;
  for (Node* n : g.nodes())
    for (Graph* sub : n->subgraphs())
      if (NameUsedBelow(*sub, name)) return true;
  return false;
}

}  // namespace

std::string Graph::UniqueName(std::string_view base) const {
  const Graph* top = this;
  while (top->parent()) top = top->parent();
  std::string candidate(base.empty() ? "v" : base);
  for (int i = 1; NameUsedBelow(*top, candidate); ++i) candidate = StrCat(base.empty() ? "v" : base, "_", i);
  return candidate;
}

namespace {

// Renames outer-scope references to `old_name` in the subgraphs below `g`, stopping where a subgraph
// defines the name itself.
void RenameOuterReferences(Graph& g, const std::string& old_name, const std::string& new_name) {
  for (Node* n : g.nodes()) {
    for (Graph* sub : n->subgraphs()) {
      Value* v = sub->FindValue(old_name);
      if (v && !v->is_outer_scope()) continue;  // shadowed: the references below are to the subgraph's own value
      if (v) ONNXAMP_CHECK(sub->RenameValue(v, new_name).ok(), "cannot rename outer reference '", old_name, "'");
      RenameOuterReferences(*sub, old_name, new_name);
    }
  }
}

}  // namespace

Status Graph::RenameValue(Value* v, std::string new_name) {
  ONNXAMP_CHECK(v && v->graph_ == this, "value does not belong to graph '", name_, "'");
  if (new_name == v->name_) return Status::Ok();
  if (new_name.empty()) return InvalidArgument("cannot rename value '", v->name_, "' to an empty name");
  if (values_.count(new_name)) return InvalidArgument("graph '", name_, "' already has a value named '", new_name, "'");
  std::string old_name = v->name_;
  values_.erase(old_name);
  v->name_ = new_name;
  values_.emplace(new_name, v);
  if (v->initializer_) v->initializer_->set_name(new_name);
  if (!v->outer_scope_) RenameOuterReferences(*this, old_name, new_name);
  return Status::Ok();
}

void Graph::RemoveValue(Value* v) {
  ONNXAMP_CHECK(v && v->graph_ == this, "value does not belong to graph '", name_, "'");
  ONNXAMP_CHECK(!v->producer_ && v->uses_.empty() && !v->is_input_ && v->output_count_ == 0 && !v->initializer_ &&
                    !v->sparse_initializer_,
                "value '", v->name_, "' is still referenced");
  RemoveValueInfo(v);
  values_.erase(v->name_);
  auto it = std::find_if(value_storage_.begin(), value_storage_.end(), [&](const auto& p) { return p.get() == v; });
  value_storage_.erase(it);
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(value_storage_.size());
  for (const auto& v : value_storage_) out.push_back(v.get());
  return out;
}

void Graph::AddInput(Value* v) {
  ONNXAMP_CHECK(v && v->graph_ == this, "input does not belong to graph '", name_, "'");
  ONNXAMP_CHECK(!v->is_input_, "value '", v->name_, "' is already an input");
  v->is_input_ = true;
  inputs_.push_back(v);
}

void Graph::RemoveInput(Value* v) {
  auto it = std::find(inputs_.begin(), inputs_.end(), v);
  ONNXAMP_CHECK(it != inputs_.end(), "value is not an input of graph '", name_, "'");
  inputs_.erase(it);
  v->is_input_ = false;
}

void Graph::AddOutput(Value* v) {
  ONNXAMP_CHECK(v && v->graph_ == this, "output does not belong to graph '", name_, "'");
  ++v->output_count_;
  outputs_.push_back(v);
}

void Graph::SetOutput(size_t i, Value* v) {
  ONNXAMP_CHECK(i < outputs_.size() && v && v->graph_ == this, "bad output ", i, " of graph '", name_, "'");
  --outputs_[i]->output_count_;
  outputs_[i] = v;
  ++v->output_count_;
}

void Graph::RemoveOutput(size_t i) {
  ONNXAMP_CHECK(i < outputs_.size(), "output index ", i, " out of range");
  --outputs_[i]->output_count_;
  outputs_.erase(outputs_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Graph::SetInitializer(Value* v, Tensor t) {
  ONNXAMP_CHECK(v && v->graph_ == this, "initializer value does not belong to graph '", name_, "'");
  t.set_name(v->name_);
  if (!v->initializer_) initializer_order_.push_back(v);
  v->initializer_ = std::make_unique<Tensor>(std::move(t));
}

void Graph::RemoveInitializer(Value* v) {
  auto it = std::find(initializer_order_.begin(), initializer_order_.end(), v);
  ONNXAMP_CHECK(it != initializer_order_.end(), "value is not an initializer of graph '", name_, "'");
  initializer_order_.erase(it);
  v->initializer_.reset();
}

void Graph::SetSparseInitializer(Value* v, SparseTensor t) {
  ONNXAMP_CHECK(v && v->graph_ == this, "sparse initializer value does not belong to graph '", name_, "'");
  if (!v->sparse_initializer_) sparse_initializer_order_.push_back(v);
  v->sparse_initializer_ = std::make_unique<SparseTensor>(std::move(t));
}

void Graph::AddValueInfo(Value* v) {
  ONNXAMP_CHECK(v && v->graph_ == this, "value_info value does not belong to graph '", name_, "'");
  if (std::find(value_info_.begin(), value_info_.end(), v) == value_info_.end()) value_info_.push_back(v);
}

void Graph::RemoveValueInfo(Value* v) {
  auto it = std::find(value_info_.begin(), value_info_.end(), v);
  if (it != value_info_.end()) value_info_.erase(it);
}

Node* Graph::AddNode(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs, std::string name,
                     std::string domain) {
  return InsertNode(nullptr, std::move(op_type), std::move(inputs), std::move(outputs), std::move(name),
                    std::move(domain));
}

Node* Graph::InsertNode(Node* before, std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                        std::string name, std::string domain) {
  auto node = std::unique_ptr<Node>(new Node(this, std::move(op_type), std::move(domain), std::move(name)));
  Node* raw = node.get();
  auto pos = before ? before->position_ : nodes_.end();
  if (before) ONNXAMP_CHECK(before->graph_ == this, "insertion point belongs to another graph");
  raw->position_ = nodes_.insert(pos, std::move(node));
  for (Value* in : inputs) raw->AddInput(in);
  for (size_t i = 0; i < outputs.size(); ++i) raw->SetOutput(i, outputs[i]);
  return raw;
}

void Graph::RemoveNode(Node* n) {
  ONNXAMP_CHECK(n && n->graph_ == this, "node does not belong to graph '", name_, "'");
  for (size_t i = 0; i < n->inputs_.size(); ++i) n->SetInput(i, nullptr);
  for (size_t i = 0; i < n->outputs_.size(); ++i) n->SetOutput(i, nullptr);
  nodes_.erase(n->position_);
}

void Graph::MoveNodeBefore(Node* n, Node* before) {
  ONNXAMP_CHECK(n && n->graph_ == this && (!before || before->graph_ == this), "nodes belong to another graph");
  if (n == before) return;
  nodes_.splice(before ? before->position_ : nodes_.end(), nodes_, n->position_);
}

namespace {

// Names that the subgraphs of `sub` (and `sub` itself) read from outside `sub`, excluding names shadowed by a
// graph on the way down.
void CollectOuterNames(const Graph& sub, std::set<std::string>* shadowed, std::set<std::string>* out) {
  std::vector<std::string> added;
  for (Value* v : sub.values()) {
    if (v->is_outer_scope()) {
      if (!shadowed->count(v->name())) out->insert(v->name());
    } else if (shadowed->insert(v->name()).second) {
      added.push_back(v->name());
    }
  }
  for (Node* n : sub.nodes())
    for (Graph* g : n->subgraphs()) CollectOuterNames(*g, shadowed, out);
  for (const std::string& name : added) shadowed->erase(name);
}

}  // namespace

std::vector<Value*> Graph::ImplicitInputs(const Node* n) const {
  std::vector<Value*> out;
  std::unordered_set<Value*> seen;
  for (Value* v : n->inputs())
    if (v && seen.insert(v).second) out.push_back(v);
  for (Value* v : SubgraphReads(n))
    if (seen.insert(v).second) out.push_back(v);
  return out;
}

std::vector<Value*> Graph::SubgraphReads(const Node* n) const {
  std::set<std::string> shadowed, names;
  for (Graph* sub : n->subgraphs()) CollectOuterNames(*sub, &shadowed, &names);
  std::vector<Value*> out;
  for (const std::string& name : names) {
    if (Value* v = FindValue(name)) out.push_back(v);
  }
  return out;
}

std::vector<std::string> Graph::OuterScopeNames() const {
  std::set<std::string> shadowed, names;
  CollectOuterNames(*this, &shadowed, &names);
  return {names.begin(), names.end()};
}

void Graph::PromoteOuterScopeToInput(Value* v) {
  ONNXAMP_CHECK(v && v->graph_ == this && v->outer_scope_, "value is not an outer-scope value of graph '", name_, "'");
  v->outer_scope_ = false;
  AddInput(v);
}

void Graph::DemoteInputToOuterScope(Value* v) {
  ONNXAMP_CHECK(v && v->graph_ == this && v->is_input_ && !v->initializer_, "value is not an input of graph '", name_,
                "' without an initializer");
  RemoveInput(v);
  v->outer_scope_ = true;
}

StatusOr<std::vector<Node*>> Graph::TopologicalOrder() const {
  std::unordered_map<const Node*, size_t> index;
  std::vector<Node*> order;
  for (Node* n : nodes()) {
    index.emplace(n, order.size());
    order.push_back(n);
  }
  std::vector<int> pending(order.size(), 0);
  std::vector<std::vector<size_t>> consumers(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    std::unordered_set<size_t> deps;
    for (Value* v : ImplicitInputs(order[i])) {
      if (v->producer() && v->producer()->graph() == this) deps.insert(index.at(v->producer()));
    }
    for (size_t d : deps) {
      consumers[d].push_back(i);
      ++pending[i];
    }
  }
  // Kahn's algorithm, always taking the ready node that comes first in the current order.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < order.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<Node*> sorted;
  sorted.reserve(order.size());
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    sorted.push_back(order[i]);
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  if (sorted.size() != order.size()) {
    for (size_t i = 0; i < order.size(); ++i) {
      if (pending[i] > 0) {
        return InvalidArgument("graph '", name_, "' has a cycle through node ", order[i]->Describe());
      }
    }
  }
  return sorted;
}

Status Graph::SortTopologically() {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<Node*> sorted, TopologicalOrder());
  for (Node* n : sorted) nodes_.splice(nodes_.end(), nodes_, n->position_);
  return Status::Ok();
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto copy = std::make_unique<Graph>(name_);
  copy->doc_string_ = doc_string_;
  for (const auto& v : value_storage_) {
    Value* c = copy->CreateValue(v->name_);
    c->type_ = v->type_;
    c->doc_string_ = v->doc_string_;
    c->outer_scope_ = v->outer_scope_;
  }
  auto map = [&](const Value* v) { return v ? copy->FindValue(v->name_) : nullptr; };
  for (Value* v : inputs_) copy->AddInput(map(v));
  for (Value* v : initializer_order_) copy->SetInitializer(map(v), *v->initializer_);
  for (Value* v : sparse_initializer_order_) copy->SetSparseInitializer(map(v), *v->sparse_initializer_);
  for (const auto& n : nodes_) {
    std::vector<Value*> ins, outs;
    for (Value* v : n->inputs_) ins.push_back(map(v));
    for (Value* v : n->outputs_) outs.push_back(map(v));
    Node* c = copy->AddNode(n->op_type_, ins, outs, n->name_, n->domain_);
    c->doc_string_ = n->doc_string_;
    for (const Attribute& a : n->attributes_) c->SetAttribute(a);
  }
  for (Value* v : outputs_) copy->AddOutput(map(v));
  for (Value* v : value_info_) copy->AddValueInfo(map(v));
  copy->quantization_annotation_ = quantization_annotation_;
  return copy;
}

}  // namespace onnxamp::ir
