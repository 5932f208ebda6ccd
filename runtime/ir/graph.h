// The graph IR: Graph owns Nodes and Values; a Value knows its producer and its uses.
//
// Vocabulary is ONNX's: a Node has an op_type, a domain, attributes, and ordered input/output Values. An
// omitted optional input or output is a null Value*. Subgraphs (If/Loop/Scan bodies) are Graphs owned by an
// attribute of their node; a name a subgraph uses but does not define is an outer-scope reference: a Value
// of the subgraph marked is_outer_scope(), resolved by name through the enclosing graphs.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/attribute.h"
#include "runtime/ir/tensor.h"
#include "runtime/ir/type.h"

namespace onnxamp::ir {

class Graph;
class Node;

// A consumer of a Value: input `index` of `node`.
struct Use {
  Node* node = nullptr;
  int index = 0;
  bool operator==(const Use& o) const = default;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  Graph* graph() const { return graph_; }

  const ValueType& type() const { return type_; }
  void set_type(ValueType t) { type_ = std::move(t); }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string d) { doc_string_ = std::move(d); }

  // The node computing this value and which of its outputs it is; null for inputs, initializers, outer refs.
  Node* producer() const { return producer_; }
  int producer_index() const { return producer_index_; }
  // Node inputs that read this value, in the order they were connected. Graph outputs are not uses.
  const std::vector<Use>& uses() const { return uses_; }

  bool is_graph_input() const { return is_input_; }
  bool is_graph_output() const { return output_count_ > 0; }
  bool is_outer_scope() const { return outer_scope_; }
  const Tensor* initializer() const { return initializer_.get(); }
  Tensor* mutable_initializer() { return initializer_.get(); }
  const SparseTensor* sparse_initializer() const { return sparse_initializer_.get(); }

 private:
  friend class Graph;
  friend class Node;
  Value(Graph* graph, std::string name) : name_(std::move(name)), graph_(graph) {}
  void RemoveUse(Node* node, int index);

  std::string name_;
  Graph* graph_;
  ValueType type_;
  std::string doc_string_;
  Node* producer_ = nullptr;
  int producer_index_ = -1;
  std::vector<Use> uses_;
  bool is_input_ = false;
  int output_count_ = 0;  // a value may be listed more than once among the graph outputs
  bool outer_scope_ = false;
  std::unique_ptr<Tensor> initializer_;
  std::unique_ptr<SparseTensor> sparse_initializer_;
};

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  void set_op_type(std::string t) { op_type_ = std::move(t); }
  // "" is the default ONNX domain ("ai.onnx" is normalised to "" on import only if the file did so).
  const std::string& domain() const { return domain_; }
  void set_domain(std::string d) { domain_ = std::move(d); }
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string d) { doc_string_ = std::move(d); }
  Graph* graph() const { return graph_; }

  // "Add 'layer1/add'" or "Add (unnamed, output 'y')": how messages name a node.
  std::string Describe() const;

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }

  // Connects input `i` to `v` (null: omitted), keeping use lists right.
  void SetInput(size_t i, Value* v);
  void AddInput(Value* v);
  void RemoveInput(size_t i);  // later inputs shift down by one
  // Makes `v` (which must have no producer and belong to this node's graph) output `i`.
  void SetOutput(size_t i, Value* v);
  // Drops the omitted (null) outputs at the end of the output list: an op whose outputs depend on an attribute
  // (BatchNormalization's running statistics in training mode) must list only the ones it has.
  void DropTrailingOmittedOutputs();

  const std::vector<Attribute>& attributes() const { return attributes_; }
  const Attribute* FindAttribute(std::string_view name) const;
  Attribute* FindAttribute(std::string_view name);
  // Adds or replaces the attribute of the same name; subgraphs it carries become children of this node.
  void SetAttribute(Attribute attr);
  bool RemoveAttribute(std::string_view name);

  int64_t GetInt(std::string_view name, int64_t default_value) const;
  float GetFloat(std::string_view name, float default_value) const;
  std::string GetString(std::string_view name, std::string default_value) const;
  std::vector<int64_t> GetInts(std::string_view name, std::vector<int64_t> default_value = {}) const;

  // Subgraphs carried by this node's attributes (If branches, Loop/Scan bodies), in attribute order.
  std::vector<Graph*> subgraphs() const;

 private:
  friend class Graph;
  Node(Graph* graph, std::string op_type, std::string domain, std::string name)
      : op_type_(std::move(op_type)), domain_(std::move(domain)), name_(std::move(name)), graph_(graph) {}
  void AdoptSubgraphs(Attribute& attr);

  std::string op_type_;
  std::string domain_;
  std::string name_;
  std::string doc_string_;
  Graph* graph_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Attribute> attributes_;
  std::list<std::unique_ptr<Node>>::iterator position_;
};

// ONNX quantization_annotation entries, kept for round trips.
struct TensorAnnotation {
  std::string tensor_name;
  std::vector<std::pair<std::string, std::string>> quant_parameter_tensor_names;
};

class Graph {
 public:
  explicit Graph(std::string name = "");
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string d) { doc_string_ = std::move(d); }

  // For subgraphs: the node whose attribute owns this graph, and that node's graph. Null at the top level.
  Node* parent_node() const { return parent_node_; }
  Graph* parent() const { return parent_node_ ? parent_node_->graph() : nullptr; }

  // ---- Values
  Value* FindValue(std::string_view name) const;     // this graph only
  Value* ResolveValue(std::string_view name) const;  // this graph, then each enclosing graph
  // Creates a value; the name must be new in this graph and non-empty (ONNXAMP_CHECK).
  Value* CreateValue(std::string name);
  // Creates a value standing for `name` of an enclosing graph.
  Value* CreateOuterScopeValue(std::string name);
  // A name not yet used in this graph or any enclosing one: `base`, or `base_1`, `base_2`, ...
  std::string UniqueName(std::string_view base) const;
  // Renames `v`; fails if the name is taken.
  Status RenameValue(Value* v, std::string new_name);
  // Deletes a value nothing refers to (no producer, no uses, not an input/output/initializer).
  void RemoveValue(Value* v);
  // All values, in creation order.
  std::vector<Value*> values() const;

  // ---- Inputs, outputs, initializers, value_info (each keeps file order)
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void AddInput(Value* v);
  void RemoveInput(Value* v);
  void AddOutput(Value* v);
  void SetOutput(size_t i, Value* v);
  void RemoveOutput(size_t i);

  const std::vector<Value*>& initializers() const { return initializer_order_; }
  void SetInitializer(Value* v, Tensor t);  // adds or replaces
  void RemoveInitializer(Value* v);
  const std::vector<Value*>& sparse_initializers() const { return sparse_initializer_order_; }
  void SetSparseInitializer(Value* v, SparseTensor t);

  // Values with a value_info entry (intermediate type annotations).
  const std::vector<Value*>& value_info() const { return value_info_; }
  void AddValueInfo(Value* v);  // no-op if already listed
  void RemoveValueInfo(Value* v);

  std::vector<TensorAnnotation>& quantization_annotation() { return quantization_annotation_; }
  const std::vector<TensorAnnotation>& quantization_annotation() const { return quantization_annotation_; }

  // ---- Nodes (kept in a list; the order is the order export writes)
  using NodeList = std::list<std::unique_ptr<Node>>;
  class NodeIterator {
   public:
    explicit NodeIterator(NodeList::const_iterator it) : it_(it) {}
    Node* operator*() const { return it_->get(); }
    NodeIterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator!=(const NodeIterator& o) const { return it_ != o.it_; }
    bool operator==(const NodeIterator& o) const { return it_ == o.it_; }

   private:
    NodeList::const_iterator it_;
  };
  struct NodeRange {
    NodeList::const_iterator b, e;
    NodeIterator begin() const { return NodeIterator(b); }
    NodeIterator end() const { return NodeIterator(e); }
  };
  NodeRange nodes() const { return {nodes_.begin(), nodes_.end()}; }
  size_t num_nodes() const { return nodes_.size(); }

  // Appends a node. Outputs must be values of this graph without a producer (ONNXAMP_CHECK).
  Node* AddNode(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs, std::string name = "",
                std::string domain = "");
  // Same, placed just before `before` (null: at the end).
  Node* InsertNode(Node* before, std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                   std::string name = "", std::string domain = "");
  // Disconnects and deletes a node; its output values stay, without a producer.
  void RemoveNode(Node* n);
  void MoveNodeBefore(Node* n, Node* before);  // before == null: to the end

  // Values of this graph that `n` reads, including those its subgraphs read from outer scope.
  std::vector<Value*> ImplicitInputs(const Node* n) const;
  // Values of this graph that the subgraphs of `n` read from outer scope, in name order (a name defined further out
  // than this graph is left out).
  std::vector<Value*> SubgraphReads(const Node* n) const;
  // The names this graph and its subgraphs read from enclosing graphs, sorted.
  std::vector<std::string> OuterScopeNames() const;
  // Makes `v`, an outer-scope value of this graph, an ordinary input of it (appended to the inputs): how a subgraph
  // becomes a graph of its own that is run with the enclosing values it reads passed in.
  void PromoteOuterScopeToInput(Value* v);
  // The reverse: makes input `v` (without an initializer) an outer-scope value of this graph, read by name from the
  // graph that will enclose it.
  void DemoteInputToOuterScope(Value* v);

  // Nodes in an order where every producer precedes its consumers, keeping the current order where it
  // already does. Fails on a cycle, naming a node on it.
  StatusOr<std::vector<Node*>> TopologicalOrder() const;
  Status SortTopologically();

  // Deep copy (values, nodes, attributes, subgraphs). The copy has no parent.
  std::unique_ptr<Graph> Clone() const;

 private:
  friend class Node;

  std::string name_;
  std::string doc_string_;
  Node* parent_node_ = nullptr;
  NodeList nodes_;
  std::vector<std::unique_ptr<Value>> value_storage_;
  std::unordered_map<std::string, Value*> values_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializer_order_;
  std::vector<Value*> sparse_initializer_order_;
  std::vector<Value*> value_info_;
  std::vector<TensorAnnotation> quantization_annotation_;
};

}  // namespace onnxamp::ir
