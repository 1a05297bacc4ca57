/*
 * A transaction-processing loop in the manner of SPECjbb2005 (itself after TPC-C): a company
 * of W warehouses, each with 10 districts of 3,000 customers and a stock of 20,000 items, and
 * a catalogue of 20,000 items shared by all. A single driver thread runs T transactions drawn
 * from TPC-C's mix — new order 45%, payment 43%, order status 4%, delivery 4%, stock level
 * 4% — on warehouses drawn uniformly, with every random choice from java.util.Random(seed).
 * Orders live in per-district hash maps and new-order queues until a delivery takes them; the
 * history of payments grows, so the live heap grows with T as SPECjbb's does.
 *
 * usage: java Txn W T SEED    prints the company's checksum.
 */
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Random;

public final class Txn {
    static final int DISTRICTS = 10, CUSTOMERS = 3000, ITEMS = 20000;

    static final class Item {
        final int id; final String name; final long price;
        Item(int id, String name, long price) { this.id = id; this.name = name; this.price = price; }
    }
    static final class Stock {
        int quantity; long ytd; int orders; final String data;
        Stock(int q, String data) { this.quantity = q; this.data = data; }
    }
    static final class Customer {
        final int id; final String last; long balance; long ytdPayment; int payments;
        Order lastOrder; final String data;
        Customer(int id, String last, String data) { this.id = id; this.last = last; this.data = data; }
    }
    static final class OrderLine {
        final Item item; final int quantity; final long amount;
        OrderLine(Item item, int quantity, long amount) { this.item = item; this.quantity = quantity; this.amount = amount; }
    }
    static final class Order {
        final int id; final Customer customer; final OrderLine[] lines; boolean delivered; long total;
        Order(int id, Customer c, OrderLine[] lines) { this.id = id; this.customer = c; this.lines = lines; }
    }
    static final class History {
        final Customer customer; final long amount; final String data;
        History(Customer c, long amount, String data) { this.customer = c; this.amount = amount; this.data = data; }
    }
    static final class District {
        final Customer[] customers = new Customer[CUSTOMERS];
        final HashMap<String, ArrayList<Customer>> byLast = new HashMap<>();
        final HashMap<Integer, Order> orders = new HashMap<>();
        final ArrayDeque<Order> newOrders = new ArrayDeque<>();
        int nextOrder = 1; long ytd;
    }
    static final class Warehouse {
        final District[] districts = new District[DISTRICTS];
        final Stock[] stock = new Stock[ITEMS];
        final ArrayList<History> history = new ArrayList<>();
        long ytd;
    }

    static final String[] SYLLABLES = {"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"};

    static String lastName(int n) {
        return SYLLABLES[(n / 100) % 10] + SYLLABLES[(n / 10) % 10] + SYLLABLES[n % 10];
    }

    static String text(Random r, int min, int max) {
        int len = min + r.nextInt(max - min + 1);
        StringBuilder b = new StringBuilder(len);
        for (int i = 0; i < len; i++) b.append((char) ('a' + r.nextInt(26)));
        return b.toString();
    }

    final Item[] items = new Item[ITEMS];
    final Warehouse[] warehouses;
    final Random r;

    Txn(int w, long seed) {
        r = new Random(seed);
        for (int i = 0; i < ITEMS; i++) items[i] = new Item(i, text(r, 14, 24), 100 + r.nextInt(9900));
        warehouses = new Warehouse[w];
        for (int i = 0; i < w; i++) {
            Warehouse wh = new Warehouse();
            for (int s = 0; s < ITEMS; s++) wh.stock[s] = new Stock(10 + r.nextInt(91), text(r, 26, 50));
            for (int d = 0; d < DISTRICTS; d++) {
                District di = new District();
                for (int c = 0; c < CUSTOMERS; c++) {
                    Customer cu = new Customer(c, lastName(c < 1000 ? c : r.nextInt(1000)), text(r, 50, 100));
                    di.customers[c] = cu;
                    di.byLast.computeIfAbsent(cu.last, k -> new ArrayList<>()).add(cu);
                }
                wh.districts[d] = di;
            }
            warehouses[i] = wh;
        }
    }

    void newOrder(Warehouse wh) {
        District d = wh.districts[r.nextInt(DISTRICTS)];
        Customer c = d.customers[r.nextInt(CUSTOMERS)];
        OrderLine[] lines = new OrderLine[5 + r.nextInt(11)];
        long total = 0;
        for (int i = 0; i < lines.length; i++) {
            Item it = items[r.nextInt(ITEMS)];
            Stock s = (r.nextInt(100) == 0 ? warehouses[r.nextInt(warehouses.length)] : wh).stock[it.id];
            int q = 1 + r.nextInt(10);
            s.quantity = s.quantity >= q + 10 ? s.quantity - q : s.quantity - q + 91;
            s.ytd += q;
            s.orders++;
            lines[i] = new OrderLine(it, q, q * it.price);
            total += q * it.price;
        }
        Order o = new Order(d.nextOrder++, c, lines);
        o.total = total;
        d.orders.put(o.id, o);
        d.newOrders.add(o);
        c.lastOrder = o;
    }

    void payment(Warehouse wh) {
        District d = wh.districts[r.nextInt(DISTRICTS)];
        Customer c;
        if (r.nextInt(100) < 60) {
            ArrayList<Customer> same = d.byLast.get(lastName(r.nextInt(1000)));
            c = same.get(same.size() / 2);
        } else {
            c = d.customers[r.nextInt(CUSTOMERS)];
        }
        long amount = 100 + r.nextInt(500000);
        wh.ytd += amount;
        d.ytd += amount;
        c.balance -= amount;
        c.ytdPayment += amount;
        c.payments++;
        wh.history.add(new History(c, amount, text(r, 12, 24)));
    }

    long orderStatus(Warehouse wh) {
        District d = wh.districts[r.nextInt(DISTRICTS)];
        Order o = d.customers[r.nextInt(CUSTOMERS)].lastOrder;
        long s = 0;
        if (o != null) for (OrderLine l : o.lines) s += l.amount + l.quantity;
        return s;
    }

    void delivery(Warehouse wh) {
        for (District d : wh.districts) {
            Order o = d.newOrders.poll();
            if (o == null) continue;
            o.delivered = true;
            o.customer.balance += o.total;
            if (d.orders.size() > 2000) d.orders.remove(o.id - 2000);
        }
    }

    int stockLevel(Warehouse wh) {
        District d = wh.districts[r.nextInt(DISTRICTS)];
        int threshold = 10 + r.nextInt(11), low = 0;
        for (int id = Math.max(1, d.nextOrder - 20); id < d.nextOrder; id++) {
            Order o = d.orders.get(id);
            if (o == null) continue;
            for (OrderLine l : o.lines) if (wh.stock[l.item.id].quantity < threshold) low++;
        }
        return low;
    }

    long run(long txns) {
        long check = 0;
        for (long t = 0; t < txns; t++) {
            Warehouse wh = warehouses[r.nextInt(warehouses.length)];
            int x = r.nextInt(100);
            if (x < 45) newOrder(wh);
            else if (x < 88) payment(wh);
            else if (x < 92) check += orderStatus(wh);
            else if (x < 96) delivery(wh);
            else check += stockLevel(wh);
        }
        for (Warehouse wh : warehouses) check += wh.ytd + wh.history.size();
        return check;
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: java Txn WAREHOUSES TRANSACTIONS SEED");
            System.exit(2);
        }
        int w = Integer.parseInt(args[0]);
        long t = Long.parseLong(args[1]);
        Txn company = new Txn(w, Long.parseLong(args[2]));
        System.out.println("txn warehouses=" + w + " transactions=" + t + " check=" + company.run(t));
    }
}
